"""What the endpoint benchmarks (`endpoint.py`, `serve_load.py`) run against, on 127.0.0.1: a
simulated OpenAI-compatible endpoint with capacity to spare, llama.cpp's own server with the
embedded model, and a retriever that needs no index. Benchmarks import no test code, so these are
the benchmarks' own: smaller than the tests' doubles, which script replies call by call."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from treeqa.data.corpus import Passage
from treeqa.retrievers.base import Retriever

# DSPy's chat adapter lists a signature's output fields in the system message, one a line
OUTPUTS = re.compile(r"Your output fields are:\n(.*?)\nAll interactions", re.S)
FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*\)?)\)", re.M)


def _value(name: str, kind: str, answer: str) -> str:
    """A value of the field's type, in the text DSPy's chat adapter parses."""
    if kind.startswith("Literal["):
        return re.findall(r"'([^']*)'", kind)[0]
    typed = {"bool": "True", "float": "0.9", "int": "1"}
    if kind in typed:
        return typed[kind]
    if kind.startswith("list["):
        return '["a follow-up question"]'
    if kind.startswith("dict["):  # a tool's arguments (ReAct): one query
        return '{"query": "a follow-up question"}'
    return answer if name == "answer" else f"Some {name.replace('_', ' ')}: {answer}."


def any_signature_reply(messages: list[dict], answer: str) -> str:
    """A reply in DSPy's chat format filling every output field the request's system message asks for."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    block = OUTPUTS.search(system)
    fields = FIELD.findall(block.group(1)) if block else [("answer", "str")]
    return "".join(f"[[ ## {n} ## ]]\n{_value(n, k, answer)}\n\n" for n, k in fields) + "[[ ## completed ## ]]"


@contextmanager
def simulated_endpoint(latency: float, answer: str = "Cincinnati") -> Iterator[str]:
    """An OpenAI-compatible chat server on a free port of 127.0.0.1 that answers any signature after
    `latency` seconds, every request at once (capacity to spare); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            time.sleep(latency)
            message = {"role": "assistant", "content": any_signature_reply(body.get("messages") or [], answer)}
            data = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": body.get("model"),
                               "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def llama_server(threads: int = 2, logprobs: bool = True) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python's server extra) with the embedded GGUF,
    started as docs/language-models.md starts it, on a free port of 127.0.0.1; yields its base URL.
    `logprobs` keeps every prompt token's logits (`--logits_all`: what log-probabilities need)."""
    from treeqa.lm import model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()),
                               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                               "--n_threads", str(threads), "--model_alias", "qwen",
                               "--logits_all", "true" if logprobs else "false"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_for(url, server)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _wait_for(url: str, server: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1):
                return
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"llama.cpp's server exited with status {server.returncode}") from None
            time.sleep(0.2)
    raise RuntimeError(f"llama.cpp's server did not answer within {seconds:.0f} s")


class NamedRetriever(Retriever):
    """Search without an index: k passages named after the query, so only the LM's latency counts."""

    passages: list[Passage] = []

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        self._check(queries, k)
        return [[Passage(f"{q}|{i}", f"{q} title {i}", f"text {i} about {q}", 1.0 - i / 10) for i in range(k)]
                for q in queries]
