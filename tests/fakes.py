"""The test doubles and shared test data: the one module a test module imports helpers from
(fixtures live in `tests/conftest.py`; no test module imports another). One scripted engine
behind a real `dspy.LM`, one fake retriever, one stand-in encoder (`hashing_embed`), the scripts
of the Tree/Chain of Reviews and of the beam search, the annotated training records, and where
the data lies.

The engine goes through DSPy's own LM, adapters and parsing (a custom engine, as
`treeqa.lm` does for llama.cpp), so call counts and parse failures are DSPy's own. Each
call is parsed into a `Call` (its kind, its input fields, whether JSON was asked for, the
messages) and answered by a Python function: a dict of output values (written as JSON or
in the chat format, whichever the adapter asked for), raw text, or an exception to raise
(a failed call). A dict may carry `_p`: field -> the model's probability of `true` for a
boolean output, returned as token log-probabilities when the call asks for them (as the
embedded engine does). What "kind" a call is comes from a pluggable classifier: by default the
first output field asked for ("answer", "confidence", "sub_questions", "evidence",
"document", "reasoning", ...); `review_kind` names the Tree of Reviews signatures.

`run_scripted` asks a program one question under a scripted LM; a script's `Raw` reply is sent
as it is, not in the adapter's format.

`generic_responder` fills any signature's outputs from their types, for teleprompters
that call signatures of their own.

`hashing_embed` stands in for MiniLM: the autouse fixture of `tests/conftest.py` makes it what
a program embeds with by default in every fast test (integration tests keep the real encoder).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dspy
import numpy as np
import pytest
from dspy._vendor.lm15.types import TokenLogprob, TopLogprob
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from treeqa.data.corpus import Passage
from treeqa.lm import request_messages
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.encoder import EmbedFn
from treeqa.retrievers.streaming import DIM as ENCODER_DIM  # MiniLM's width, which an index build checks
from treeqa.settings import PROJECT_ROOT

FIXTURE_DATA = Path(__file__).parent / "fixtures" / "data"
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"

requires_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not present")

_CHAT_FIRST_FIELD = re.compile(r"starting with the field `\[\[ ## (\w+) ## \]\]`")
_JSON_FIRST_FIELD = re.compile(r"order of fields: `(\w+)`")
_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]\n")
_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)\nAll interactions", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*\)?)\)", re.M)
_BOOLEAN = re.compile(r"\b(true|false|True|False)\b")


@dataclass
class Call:
    """One LM call as a script sees it; list inputs (passages, paragraphs) are parsed."""

    kind: str
    inputs: dict
    json_mode: bool
    messages: list[dict]

    @property
    def titles(self) -> list[str]:
        """Titles of the paragraphs shown (the part of each 'Title: text' before the colon)."""
        return [p.split(":", 1)[0] for p in self.inputs.get("paragraphs", [])]


# --- classifiers: messages -> kind ----------------------------------------------------------

def first_output_field(messages: list[dict]) -> str:
    text = messages[-1]["content"]
    match = _CHAT_FIRST_FIELD.search(text) or _JSON_FIRST_FIELD.search(text)
    return match.group(1) if match else "?"


def review_kind(messages: list[dict]) -> str:
    """"review", "complete" (MPC) or "fuse" for the Tree/Chain of Reviews signatures."""
    system = messages[0]["content"]
    if "`missing_paragraph`" in system:
        return "complete"
    if "`relevant`" in system:
        return "review"
    if "`answer`" in system:
        return "fuse"
    raise AssertionError(f"unexpected signature in system prompt: {system[:200]}")


def _inputs(user: str) -> dict:
    user = user.split("\n\nRespond with", 1)[0]
    parts = _HEADER.split(user)
    values = {}
    for name, raw in zip(parts[1::2], parts[2::2], strict=True):
        raw = raw.strip()
        try:
            values[name] = json.loads(raw) if raw.startswith("[") else raw
        except json.JSONDecodeError:
            values[name] = raw
    return values


def chat_reply(values: dict) -> str:
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in values.items()]
    return "\n\n".join(parts + ["[[ ## completed ## ]]"])


class ScriptedEngine:
    """A DSPy engine (`complete(request) -> Response`) that answers each call with `respond(call)`."""

    def __init__(self, respond: Callable[[Call], object], classify: Callable[[list[dict]], str] = first_output_field,
                 usage: tuple[int, int] = (0, 0)):
        self.respond, self.classify, self.usage = respond, classify, usage
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def complete(self, request) -> Response:
        messages = request_messages(request)
        call = Call(self.classify(messages), _inputs(messages[-1]["content"]),
                    bool(getattr(request.config, "response_format", None)), messages)
        with self._lock:
            self.calls.append(call)
        out = self.respond(call)
        if isinstance(out, BaseException):
            raise out
        probabilities = None
        if isinstance(out, dict):
            out = dict(out)
            probabilities = out.pop("_p", None)
            booleans = [name for name, value in out.items() if isinstance(value, bool)]
            out = json.dumps(out) if call.json_mode else chat_reply(out)
        logprobs = None
        if probabilities is not None and getattr(request.config, "logprobs", None) is not None:
            logprobs = _token_logprobs(out, [probabilities.get(name) for name in booleans])
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(out)]),
                        finish_reason="stop", usage=Usage(input_tokens=self.usage[0], output_tokens=self.usage[1]),
                        logprobs=logprobs)

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def kinds(self) -> list[str]:
        return [c.kind for c in self.calls]

    def of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]


def _token_logprobs(text: str, probabilities: list) -> tuple[TokenLogprob, ...]:
    """`text` as tokens: each boolean value one token, whose alternatives carry the n-th
    boolean's probability of true; the rest whole pieces with log-probability 0."""
    tokens, booleans = [], iter(probabilities)
    for i, piece in enumerate(_BOOLEAN.split(text)):
        if i % 2 == 0:
            if piece:
                tokens.append(TokenLogprob(token=piece, logprob=0.0))
            continue
        p = next(booleans, None)
        if p is None:
            tokens.append(TokenLogprob(token=piece, logprob=0.0))
            continue
        true, false = math.log(max(p, 1e-12)), math.log(max(1 - p, 1e-12))
        spell = str.capitalize if piece[0].isupper() else str.lower  # the chosen token is among its alternatives
        tokens.append(TokenLogprob(token=piece, logprob=true if piece.lower() == "true" else false,
                                   top=(TopLogprob(token=spell("true"), logprob=true),
                                        TopLogprob(token=spell("false"), logprob=false))))
    return tuple(tokens)


def scripted_lm(respond, classify=first_output_field, whole_call: bool = False,
                usage: tuple[int, int] = (0, 0)) -> tuple[dspy.LM, ScriptedEngine]:
    """An uncached dspy.LM over a ScriptedEngine. `respond(kind, inputs)` by default;
    `respond(call)` with `whole_call=True`."""
    engine = ScriptedEngine(respond if whole_call else (lambda call: respond(call.kind, call.inputs)),
                            classify, usage)
    return dspy.LM("local/scripted", engine=engine, cache=False, num_retries=0), engine


class Raw(str):
    """A reply a script sends as it is, not in the adapter's format (a reply that does not parse)."""


def run_scripted(program, respond, question: str) -> tuple[dspy.Prediction, ScriptedEngine]:
    """Ask `program` the question under `scripted_lm(respond)`; the prediction and the engine.
    A prediction with a search tree must be able to write it as JSON (the tree is plain data)."""
    lm, engine = scripted_lm(respond)
    with dspy.context(lm=lm):
        pred = program(question=question)
    if "tree" in pred:
        json.dumps(pred.tree)
    return pred, engine


# --- a responder for any signature ------------------------------------------------------------

def generic_responder(answers: dict[str, str] | None = None, default_answer: str = "unknown"):
    """Fills every output field DSPy asks for with a value of its type (bool True, a Literal's
    first option, 0.9, a one-item list, a one-key dict) and answers from `answers` (a substring of the prompt
    -> the answer given)."""
    answers = answers or {}

    def value(name: str, kind: str, user: str) -> str:
        if kind.startswith("Literal["):
            return re.findall(r"'([^']*)'", kind)[0]
        if kind == "bool":
            return "True"
        if kind in ("float", "int"):
            return "0.9" if kind == "float" else "1"
        if kind.startswith("list["):
            return '["a follow-up question"]'
        if kind.startswith("dict["):  # a tool's arguments (ReAct): one query
            return '{"query": "a follow-up question"}'
        if name == "answer":
            return next((a for key, a in answers.items() if key in user), default_answer)
        return f"Some {name.replace('_', ' ')}: answer with one short entity."

    def respond(call: Call) -> str:
        system = call.messages[0]["content"] if call.messages[0]["role"] == "system" else ""
        block = _OUTPUTS.search(system)
        fields = _FIELD.findall(block.group(1)) if block else [("answer", "str")]
        user = call.messages[-1]["content"]
        text = "".join(f"[[ ## {n} ## ]]\n{value(n, k, user)}\n\n" for n, k in fields)
        return text + "[[ ## completed ## ]]"

    return respond


def generic_lm(answers: dict[str, str] | None = None, **kw) -> dspy.LM:
    """An LM that answers any signature (see `generic_responder`); its engine is `lm._engine_spec`."""
    engine = ScriptedEngine(generic_responder(answers, **kw), usage=(10, 5))
    return dspy.LM("local/generic", engine=engine, cache=False, num_retries=0)


# --- the retriever ----------------------------------------------------------------------------

def passage(title: str, text: str | None = None) -> Passage:
    return Passage(id=title.lower(), title=title, text=text or f"Facts about {title}.")


class FakeRetriever(Retriever):
    """Deterministic search without an index; every query is recorded in `queries` as (query, k).

    naming="query": k passages named after the query ("<query>|<i>", titled "<query> title <i>"),
        so a test sees what was found for what; with `shared_id` every query also finds the
        same passage ("common") first.
    naming="counter": fresh paragraphs titled N1, N2, ... (the same ones when a query is asked
        again), so a tree's paragraphs are told apart by number.
    `fixed` gives chosen results for chosen queries, in either mode.
    """

    def __init__(self, naming: str = "query", fixed: dict[str, list[Passage]] | None = None,
                 shared_id: bool = False):
        if naming not in ("query", "counter"):
            raise ValueError(f"naming is 'query' or 'counter', got {naming!r}")
        self.naming, self.fixed, self.shared_id = naming, fixed or {}, shared_id
        self.queries: list[tuple[str, int]] = []
        self._made: dict[str, list[Passage]] = {}
        self._count = 0

    @property
    def asked(self) -> list[str]:
        return [q for q, _ in self.queries]

    def search_batch(self, queries, k):
        self._check(queries, k)
        out = []
        for q in queries:
            self.queries.append((q, k))
            if q in self.fixed:
                out.append(self.fixed[q][:k])
            elif self.naming == "counter":
                made = self._made.setdefault(q, [])
                while len(made) < k:
                    self._count += 1
                    made.append(passage(f"N{self._count}"))
                out.append(made[:k])
            else:
                hits = [Passage(f"{q}|{i}", f"{q} title {i}", f"text {i} about {q}", 1.0 - i / 10) for i in range(k)]
                if self.shared_id:
                    hits[0] = Passage("common", "Common", "text 0 about common")
                out.append(hits)
        return out


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


def use_lm(monkeypatch, lm: dspy.LM) -> dspy.LM:
    """Make every LM treeqa builds for this test (`treeqa.lm.get_lm`, whatever the name) be `lm`."""
    import treeqa.lm

    monkeypatch.setattr(treeqa.lm, "get_lm", lambda name, **kw: lm)
    return lm


# --- the stand-in encoder ----------------------------------------------------------------------

def hashing_embed(texts: list[str]) -> np.ndarray:
    """The one stand-in for MiniLM: a bag of words, each word (lower-cased) hashed into one of 384
    buckets; L2-normalised float32 rows (a text without words is a zero row). Deterministic
    across runs, and texts that share words are similar."""
    out = np.zeros((len(texts), ENCODER_DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % ENCODER_DIM] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def hashing_embed_counting(calls: list[int]) -> EmbedFn:
    """`hashing_embed` that appends the size of each batch it is given to `calls`."""

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return hashing_embed(texts)

    return embed


# --- Tree/Chain of Reviews: a retriever, review replies, a whole script, a runner -------------

Q = "Who wrote the novel that the film Example was based on?"


def tree_retriever(fixed=None) -> FakeRetriever:
    """The fake retriever in counter mode: fresh paragraphs N1, N2, ... (see `FakeRetriever`)."""
    return FakeRetriever("counter", fixed)


def review(action: str, next_query: str = "", analysis: str = "", reasoning: str | None = None) -> dict:
    """A review reply whose judgments agree with `action`."""
    reply = {} if reasoning is None else {"reasoning": reasoning}
    reply.update(relevant=action != "reject", sufficient=action == "accept", action=action,
                 next_query=next_query, analysis=analysis)
    return reply


def answering(review_fn: Callable[[Call], dict | str], answer: str = "42",
              missing: Callable[[Call], str] | None = None) -> Callable[[Call], dict | str]:
    """A full script: reviews by `review_fn`, MPC paragraphs by `missing`, fusion answers `answer`."""

    def script(call: Call):
        if call.kind == "review":
            return review_fn(call)
        if call.kind == "complete":
            return {"missing_paragraph": missing(call) if missing else f"missing after {call.titles[-1]}"}
        return {"answer": answer}

    return script


def run(program, script, question=Q):
    """Run a ToR/CoR program under a scripted LM; returns the prediction and the engine."""
    lm, engine = scripted_lm(script, classify=review_kind, whole_call=True, usage=(1, 1))
    with dspy.context(lm=lm):
        pred = program(question=question)
    return pred, engine


# --- the beam search's script --------------------------------------------------------------------

_LAST_QUERY = re.compile(r"Query: (.*)")
_PASSAGE_OF = re.compile(r"text \d+ about (.*)")


class BeamScript:
    """Replies of the scripted LM to BeamSearchQA (`scripted_lm(BeamScript(...))`), which name every
    state by the last sub-question on its path ("root" for the seed without evidence, the question
    itself for the seed with evidence, "root1", "root12" … below them): sub-questions
    "<name><i>" (or `asks[name]`), answers "ans:<name>" (or `answers[name]`), confidences from
    `conf` (else `default`); (kind, name) pairs in `fail` raise instead of replying, those in
    `garbage` score "no idea"."""

    def __init__(self, conf=None, default=0.1, asks=None, fail=(), garbage=(), answers=None):
        self.conf, self.default = conf or {}, default
        self.asks, self.fail, self.garbage = asks or {}, set(fail), set(garbage)
        self.answers = answers or {}

    @staticmethod
    def name_of(history: str) -> str:
        queries = _LAST_QUERY.findall(history)
        return queries[-1].strip() if queries else "root"

    def __call__(self, kind, inputs):
        if kind == "sub_questions":
            name = self.name_of(inputs["history"])
            asked = self.asks.get(name, [f"{name}{i}" for i in range(1, int(inputs["max_questions"]) + 1)])
            reply = {"sub_questions": json.dumps(asked)}
        elif kind == "evidence":
            name = _PASSAGE_OF.search(inputs["passages"][0]).group(1)
            reply = {"evidence": f"facts about {name}"}
        elif kind == "document":
            name = inputs["question"]
            reply = {"document": f"background on {name}"}
        elif kind == "answer":
            name = self.name_of(inputs["history"])
            reply = {"answer": self.answers.get(name, f"ans:{name}")}
        elif kind == "confidence":
            name = self.name_of(inputs["history"])
            value = "no idea" if (kind, name) in self.garbage else str(self.conf.get(name, self.default))
            reply = {"confidence": value}
        else:
            raise AssertionError(f"unexpected call for {kind}")
        if (kind, name) in self.fail:
            return RuntimeError(f"scripted failure of {kind} for {name}")
        return reply


# --- annotated training records (the `train` fixture writes them) -------------------------------

def _hotpot(i, answer, gold, distractors):
    """A record in the official HotpotQA layout: `gold` and `distractors` are (title, [sentences])."""
    return {"_id": f"t{i}", "question": f"Question {i} about {gold[0][0]}?", "answer": answer, "type": "bridge",
            "level": "hard", "supporting_facts": [[t, 0] for t, _ in gold],
            "context": [[t, s] for t, s in gold + distractors]}


RECORDS = [
    _hotpot(1, "Vitznau", [("Rigi Railways", ["Rigi Railways runs cog trains.", " It is based in Vitznau."]),
                           ("Vitznau", ["Vitznau is a village on Lake Lucerne."])],
            [("Espresso", ["Espresso is coffee."])]),
    _hotpot(2, "1871", [("Cog railway", ["The first cog railway in Europe opened in 1871."]),
                        ("Mount Rigi", ["Mount Rigi is a mountain."])],
            [("Python", ["Python is a language."]), ("Tea", ["Tea is a drink."])]),
    _hotpot(3, "Lake Lucerne", [("Weggis", ["Weggis lies on Lake Lucerne."]),
                                ("Lake Lucerne", ["Lake Lucerne is in central Switzerland."])],
            [("Zurich", ["Zurich is a city."])]),
    {"_id": "t4", "question": "One hop only?", "answer": "x", "type": "bridge", "level": "easy",
     "supporting_facts": [["Solo", 0]], "context": [["Solo", ["Solo is alone."]]]},  # unusable: one gold paragraph
]


def _para(idx, title, text, supporting):
    return {"idx": idx, "title": title, "paragraph_text": text, "is_supporting": supporting}


MUSIQUE = {
    "id": "2hop__9", "question": "In which region is the lake that Weggis sits on?",
    "answer": "central Switzerland", "answer_aliases": [], "answerable": True,
    "paragraphs": [_para(0, "Lake Zurich", "Lake Zurich is a lake.", False),
                   _para(1, "Lake Lucerne", "Lake Lucerne lies in central Switzerland.", True),
                   _para(2, "Weggis", "Weggis sits on Lake Lucerne.", True)],
    "question_decomposition": [
        {"id": 1, "question": "Which lake does Weggis sit on?", "answer": "Lake Lucerne", "paragraph_support_idx": 2},
        {"id": 2, "question": "In which region is #1?", "answer": "central Switzerland", "paragraph_support_idx": 1},
    ],
}


# --- a real llama.cpp server (integration tests) ------------------------------------------------

@contextmanager
def llama_server(threads: int = 2, logprobs: bool = True) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python's server extra) with the embedded
    GGUF on 127.0.0.1 at a free port; yields its base URL, stops it after. `logprobs` keeps the
    logits of every prompt token (`--logits_all`), which log-probabilities need and which makes
    each prompt slower to read."""
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
                               "--n_threads", str(threads), "--model_alias", "qwen",
                               "--logits_all", "true" if logprobs else "false"],
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


# --- a tiny model for the LoRA tests ------------------------------------------------------------

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ["system", "user", "assistant", "question", "passages", "answer", "paris", "rome", "capital", "of",
         "france", "italy", "what", "is", "the", "{", "}", ":", '"', "\n"]


def tiny_tokenizer():
    """A word-level tokenizer with ChatML's template, for the tiny model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<|im_start|>", "<|im_end|>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    fast.chat_template = CHATML
    return fast


def tiny_model(layers: int = 4, seed: int = 0):
    """A random Qwen2 of 4 layers, 32 wide: the 1.5B model's architecture at a test's size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=False, attn_implementation="sdpa")
    model = Qwen2ForCausalLM(config).float().eval()
    with torch.no_grad():  # at the default 0.02 a 32-wide head cannot move a logit by more than ~1
        model.lm_head.weight.normal_(0, 1.0)
    return model


class FakeLlama:
    """Stands in for llama_cpp.Llama: records calls, 'evaluates' tokens, answers in DSPy's chat format."""

    def __init__(self, reply="[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", delay=0.0):
        self.reply, self.delay = reply, delay
        self.calls, self.active, self.max_active = [], 0, 0
        self._guard = threading.Lock()

    def eval(self, tokens):
        pass

    def create_chat_completion(self, **kwargs):
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.calls.append(kwargs)
        self.eval(list(range(30)))  # pretend 30 of the prompt tokens were not in the cache
        for _ in range(4):  # each generated token but the last is fed back
            self.eval([0])
        time.sleep(self.delay)
        with self._guard:
            self.active -= 1
        return {"id": "x", "model": "fake",
                "choices": [{"message": {"content": self.reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 5}}
