"""Servers on 127.0.0.1: a fake OpenAI-compatible endpoint (and one that answers any signature),
a TestClient that speaks as a local browser, llama.cpp's real server for the integration tests,
and `Overlap`, which counts the calls a server sees at once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.fakes.lm import Call, generic_responder


class Overlap:
    """How many calls run at once: each wraps its work in `with overlap:` (which holds it for
    `hold` seconds, so that concurrent calls do meet); `peak` is the most seen together."""

    def __init__(self, hold: float):
        self.hold, self.active, self.peak = hold, 0, 0
        self._guard = threading.Lock()

    def __enter__(self):
        with self._guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.hold)

    def __exit__(self, *exc):
        with self._guard:
            self.active -= 1


# --- an OpenAI-compatible endpoint on 127.0.0.1 ------------------------------------------------

class FakeEndpoint:
    """A tiny OpenAI-compatible chat server on 127.0.0.1 (a free port) for the endpoint path:
    `reply(n, body, headers)` -> (status, text of the assistant's message or an error body, seconds
    to wait first), for the n-th request (from 0). Use as a context manager; `requests` counts.

    Example:
        >>> with FakeEndpoint(lambda n, body, headers: (200, '[[ ## answer ## ]]\\nParis', 0)) as ep:
        ...     get_lm("openai/m", api_base=ep.url, api_key="k")
    """

    def __init__(self, reply: Callable[[int, dict, dict], tuple[int, str, float]]):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.reply, self.requests = reply, 0
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                with outer._lock:
                    n, outer.requests = outer.requests, outer.requests + 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                status, text, wait = outer.reply(n, body, dict(self.headers))
                time.sleep(wait)
                if status == 200:
                    payload = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": body.get("model"),
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                    data = json.dumps(payload).encode()
                else:
                    data = json.dumps({"error": {"message": text, "type": "error", "code": status}}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeEndpoint:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def simulated_endpoint(latency: float, overlap: Overlap | None = None, answer: str = "Cincinnati") -> FakeEndpoint:
    """An endpoint with capacity to spare: answers any signature in DSPy's chat format after
    `latency` seconds (inside `overlap`, when given, which then counts calls at once)."""
    respond = generic_responder({"": answer}, default_answer=answer)

    def reply(n: int, body: dict, headers: dict) -> tuple[int, str, float]:
        text = respond(Call("endpoint", {}, False, body["messages"]))
        if overlap is None:
            return 200, text, latency
        with overlap:
            return 200, text, 0

    return FakeEndpoint(reply)


def local_client(app, **kwargs):
    """fastapi's TestClient speaking as a browser on this machine does (Host 127.0.0.1): the
    server refuses other Host names (DNS rebinding), TestClient's own "testserver" among them."""
    from fastapi.testclient import TestClient

    return TestClient(app, base_url="http://127.0.0.1", **kwargs)


# --- a real llama.cpp server (integration tests) ------------------------------------------------

@contextmanager
def llama_server(threads: int = 2, logprobs: bool = True, lora=None, alias: str = "qwen") -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python's server extra) with the embedded
    GGUF on 127.0.0.1 at a free port; yields its base URL, stops it after. `logprobs` keeps the
    logits of every prompt token (`--logits_all`), which log-probabilities need and which makes
    each prompt slower to read. `lora`: a GGUF LoRA adapter the server adds to the model, served
    under `alias`, as a user serves a trained reader."""
    import socket
    import subprocess
    import sys
    import urllib.request

    from treeqa.lm import model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()),
                               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                               "--n_threads", str(threads), "--model_alias", alias,
                               "--logits_all", "true" if logprobs else "false",
                               *(["--lora_path", str(lora)] if lora else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=1):
                    break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError(f"llama.cpp's server exited with status {server.returncode}") from None
                time.sleep(0.2)
        else:
            raise RuntimeError("llama.cpp's server did not answer within 120 s")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
