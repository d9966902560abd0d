"""Serve a (compiled) program over HTTP, with a page that draws its search tree live.

    POST /v1/ask          {"question": ...} -> answer, confidence, passages, tree, failures, costs
    POST /v1/ask/stream   the same as server-sent events: one "step" per search step (a reviewed
                          paragraph, a scored state) as the program takes it, then "answer"
    GET  /v1/program      what is served: program, settings, optimizer, demos, dataset, model
    GET  /healthz         liveness
    GET  /                the page (plain HTML/JS/CSS shipped in treeqa/serving/static)

The embedded engine serves one call at a time, so requests run one at a time and wait in a
bounded queue (503 with Retry-After when it is full); against an endpoint `concurrency`
requests run at once. Each request has a time limit (504), questions a length limit (413),
and errors come back as JSON `{"error": ...}`; a question whose LM calls all failed is 502 (504
where the LM timed out), not an empty answer. The model runs in worker threads: the event
loop never blocks on it.

A web page the user opens must not drive the server: a question is a POST with
`Content-Type: application/json` (which a cross-site form cannot send without a CORS preflight,
and no CORS header is ever sent), and the Host header must name the server (`allowed_hosts`:
the bound address, and for a loopback or all-interfaces binding the machine's own names), so a
DNS-rebinding page cannot read the answers either.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ValidationError
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from treeqa.data.answers import RECALL_K
from treeqa.programs.common import MAX_QUESTION_CHARS, check_question, listening

STATIC = Path(__file__).parent / "static"
PASSAGE_CHARS = 1200  # passages in a response are cut to this length

log = logging.getLogger(__name__)


MAX_BODY_BYTES = 64 * 1024  # a question is at most MAX_QUESTION_CHARS; the body is read no further than this
_PUBLIC_FAILURES = (  # (what the error type's name holds, what a client is told); details stay in the log
    (("Timeout",), "the language model did not answer in time"),
    (("RateLimit",), "the language model endpoint is rate-limiting requests"),
    (("Auth", "PermissionDenied", "Billing"), "the language model endpoint refused the request's credentials"),
    (("Connection", "Transport", "Server", "ServiceUnavailable", "BadGateway", "NotFound", "APIError", "Provider"),
     "the language model endpoint could not be reached or failed"),
    (("Parse", "Validation", "JSONDecode"), "the language model's reply could not be read"),
)


class AskRequest(BaseModel):
    question: str


class Cancelled(BaseException):
    """Raised inside a search whose client has gone away (a BaseException, so no LM-failure
    handler records it as a failed call); the search stops at its next step."""


def public_failure(failure: dict) -> dict:
    """A failed call as a client may see it: where and what kind, never the upstream text (an
    endpoint's error can echo request headers, keys or internal addresses)."""
    kind = str(failure.get("error", ""))
    message = next((text for names, text in _PUBLIC_FAILURES if any(n in kind for n in names)),
                   "the language model call failed")
    return {"where": failure.get("where"), "error": kind, "message": message}


def scrub(value: Any) -> Any:
    """`value` with every recorded failure (a dict with where/error/message) made public."""
    if isinstance(value, dict):
        if {"where", "error", "message"} <= value.keys():
            return public_failure(value)
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


class ServeError(Exception):
    """An error with its HTTP status, sent as `{"error": message}` (and `failures` where LM calls failed)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 failures: list[dict] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers, self.failures = status, message, headers or {}, failures

    def body(self) -> dict:
        return {"error": self.message} | ({"failures": self.failures} if self.failures else {})


def no_answer(failures: list[dict]) -> ServeError:
    """A question left without an answer because its LM calls failed: the upstream's fault, so 502
    (504 when it timed out), with the public form of each failure."""
    last = failures[-1]
    status = 504 if "Timeout" in str(last.get("error")) else 502
    return ServeError(status, f"no answer: {last['message']}", failures=failures)


@dataclass
class Served:
    """What the app serves: the program, its LM and adapter, and what `/v1/program` reports."""

    program: dspy.Module
    lm: dspy.BaseLM
    adapter: dspy.Adapter | None = None
    info: dict[str, Any] = field(default_factory=dict)


class Runner:
    """Runs requests in worker threads: at most `concurrency` at once, at most `queue_size`
    waiting, each within `time_limit` seconds (waiting included). A request over its limit gets
    504 while its thread finishes; its slot is freed only then, so the engine is never shared."""

    def __init__(self, served: Served, concurrency: int = 1, queue_size: int = 8, time_limit: float = 300.0):
        if concurrency < 1 or queue_size < 0 or time_limit <= 0:
            raise ValueError("concurrency >= 1, queue_size >= 0 and time_limit > 0 are needed")
        self.served, self.concurrency, self.queue_size, self.time_limit = served, concurrency, queue_size, time_limit
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="treeqa-serve")
        self._slots: asyncio.Semaphore | None = None
        self._in_flight = 0  # running or waiting, until their thread has finished

    def check_capacity(self) -> None:
        if self._in_flight >= self.queue_size + self.concurrency:
            raise ServeError(503, f"busy: {self._in_flight} requests ahead; try again later",
                             {"Retry-After": str(int(min(self.time_limit, 60)))})

    async def run(self, question: str, listener=None, cancel: threading.Event | None = None) -> dict:
        self.check_capacity()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.time_limit
        self._in_flight += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=self.time_limit)
        except TimeoutError:
            self._in_flight -= 1
            raise ServeError(504, f"no slot within the {self.time_limit:g} s time limit") from None

        def finished(_) -> None:  # the slot is freed when the work really ends, not at a timeout
            self._in_flight -= 1
            self._slots.release()

        future = loop.run_in_executor(self._pool, self._answer, question, listener, cancel)
        future.add_done_callback(finished)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise ServeError(504, f"the answer took longer than the {self.time_limit:g} s time limit") from None

    def _answer(self, question: str, listener, cancel: threading.Event | None = None) -> dict:
        served = self.served
        started = time.perf_counter()
        # no call history: DSPy keeps up to 10,000 calls globally and per LM and module, which a
        # server answering unique questions would hold for ever
        context = {"lm": served.lm, "disable_history": True} | (
            {"adapter": served.adapter} if served.adapter is not None else {})

        def step(event: dict) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("the client went away")
            if listener is not None:
                listener(event)

        with dspy.context(**context), dspy.track_usage() as usage, listening(step):
            try:
                prediction = served.program(question=question)
            except Cancelled:
                return {"question": question, "cancelled": True, "seconds": round(time.perf_counter() - started, 3)}
        calls = [entry for entries in usage.usage_data.values() for entry in entries]
        out: dict[str, Any] = {
            "question": question,
            "answer": str(getattr(prediction, "answer", "") or ""),
            "passages": [{"id": p.id, "title": p.title, "text": p.text[:PASSAGE_CHARS]}
                         for p in (getattr(prediction, "retrieved", None) or [])[:RECALL_K]],
            "tree": getattr(prediction, "tree", None),
            "failures": [public_failure(f) for f in getattr(prediction, "failures", None) or []],
            "lm_calls": len(calls),
            "prompt_tokens": sum(e.get("prompt_tokens") or 0 for e in calls),
            "completion_tokens": sum(e.get("completion_tokens") or 0 for e in calls),
            "seconds": round(time.perf_counter() - started, 3),
        }
        if getattr(prediction, "confidence", None) is not None:
            out["confidence"] = float(prediction.confidence)
        for failure in getattr(prediction, "failures", None) or []:
            log.warning("LM call %s failed: %s: %s", failure.get("where"), failure.get("error"),
                        str(failure.get("message"))[:500])
        if not out["answer"].strip() and out["failures"]:
            raise no_answer(out["failures"])
        return scrub(json.loads(json.dumps(out, default=str)))  # plain JSON, whatever the tree holds


async def read_question(request: Request) -> str:
    """The question of a POST body, read no further than MAX_BODY_BYTES (a larger body is
    refused while it arrives, never held or parsed whole). Only a JSON body is read: a form or
    text/plain POST is what any web page can send cross-site without asking."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise ServeError(415, f"send the question as JSON with Content-Type: application/json, not "
                              f"{media_type[:80] or 'no Content-Type'}")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ServeError(400, "bad request: Content-Length is not a number")
        if int(declared) > MAX_BODY_BYTES:
            raise ServeError(413, f"the request body is {int(declared):,} bytes; at most {MAX_BODY_BYTES:,}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ServeError(413, f"the request body is over {MAX_BODY_BYTES:,} bytes")
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise ServeError(422, "bad request: body: not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError):
        raise ServeError(422, 'bad request: body: not JSON; send {"question": "..."}') from None
    try:
        return _question(AskRequest.model_validate(data))
    except ValidationError as exc:
        messages = "; ".join(f"{'.'.join(['body', *map(str, e['loc'])])}: {e['msg']}" for e in exc.errors())
        raise ServeError(422, f"bad request: {messages}") from None


def _question(body: AskRequest) -> str:
    if len(body.question) > MAX_QUESTION_CHARS:
        raise ServeError(413, f"the question is {len(body.question):,} characters; at most {MAX_QUESTION_CHARS:,}")
    try:
        return check_question(body.question, "ask")
    except ValueError as exc:
        raise ServeError(422, str(exc)) from None


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


def allowed_hosts_for(host: str, extra: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """The Host names a server bound to `host` answers to: the address itself, the loopback names
    for a loopback binding, and for all interfaces the machine's own names and addresses; plus
    `extra` (a public name behind a proxy; "*" answers any, as before this check)."""
    import socket

    names = {host.strip("[]").lower()} | {name.strip("[]").lower() for name in extra}
    if host in LOOPBACK_NAMES or host.startswith("127."):
        names |= LOOPBACK_NAMES
    if host in WILDCARD_ADDRESSES:
        names |= LOOPBACK_NAMES | {socket.gethostname().lower(), socket.getfqdn().lower()}
        try:
            names |= {info[4][0].lower() for info in socket.getaddrinfo(socket.gethostname(), None)}
        except OSError:
            pass
    return frozenset(names - WILDCARD_ADDRESSES)


def host_name(header: str) -> str:
    """The name in a Host header, without its port ("[::1]:8000" -> "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]")[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostCheck:
    """Refuses (421, as JSON) a request whose Host header does not name this server: a page on
    another site that rebinds its DNS name to 127.0.0.1 reaches the server under its own name."""

    def __init__(self, app, allowed: frozenset[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and "*" not in self.allowed:
            header = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")
            if host_name(header) not in self.allowed:
                response = JSONResponse({"error": f"this server does not answer to Host {header[:100]!r}; "
                                                  "start it with --allow-host NAME to add a name"}, status_code=421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(served: Served, concurrency: int = 1, queue_size: int = 8, time_limit: float = 300.0,
               allowed_hosts: frozenset[str] | None = None) -> FastAPI:
    """The FastAPI app for `served` (see the module docstring for the routes); `allowed_hosts`
    (`allowed_hosts_for`) are the Host names it answers to, the loopback names by default."""
    app = FastAPI(title="treeqa", description="Question answering by search, served.")
    allowed = allowed_hosts if allowed_hosts is not None else allowed_hosts_for("127.0.0.1")
    app.add_middleware(HostCheck, allowed=allowed)
    runner = Runner(served, concurrency, queue_size, time_limit)
    app.state.runner = runner
    _add_error_handlers(app)
    _add_info_routes(app, served)
    _add_ask_routes(app, runner)
    _add_page(app)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error as JSON `{"error": ...}`: ours with their status, FastAPI's validation and
    HTTP errors in the same shape, and a crash as a bare 500 (its details stay in the log)."""

    @app.exception_handler(ServeError)
    async def serve_error(request: Request, exc: ServeError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        messages = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": f"bad request: {messages}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):  # 404, 405: the same shape as ours
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception):
        log.exception("request failed")  # the details stay in the server's log
        return JSONResponse({"error": "internal error; the server's log has the details"}, status_code=500)


def _add_info_routes(app: FastAPI, served: Served) -> None:
    """GET /healthz and GET /v1/program: what needs no LM call."""

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/v1/program")
    async def program_info():
        return served.info


def _add_ask_routes(app: FastAPI, runner: Runner) -> None:
    """POST /v1/ask and /v1/ask/stream, both through `runner`; each refuses a full queue before
    reading the body (and, streaming, before the stream opens, so with a proper status)."""

    @app.post("/v1/ask")
    async def ask(request: Request):
        runner.check_capacity()  # the queue limit applies before the body is read
        return await runner.run(await read_question(request))

    @app.post("/v1/ask/stream")
    async def ask_stream(request: Request):
        runner.check_capacity()  # refuse before the body is read and the stream opens, with a proper status
        question = await read_question(request)
        loop = asyncio.get_running_loop()
        steps: asyncio.Queue = asyncio.Queue()
        cancel = threading.Event()

        def listener(event: dict) -> None:  # called in the worker thread
            loop.call_soon_threadsafe(steps.put_nowait, scrub(json.loads(json.dumps(event, default=str))))

        return EventSourceResponse(_stream_events(runner, question, listener, steps, cancel))


async def _stream_events(runner: Runner, question: str, listener, steps: asyncio.Queue,
                         cancel: threading.Event):
    """The server-sent events of one streamed question: a "step" for each step the search takes
    (`listener` queues them in `steps`), then its "answer" or "error"; a client that leaves sets
    `cancel`, so its search stops at its next step rather than holding the engine."""
    task = asyncio.ensure_future(runner.run(question, listener, cancel))
    try:
        while True:
            step = asyncio.ensure_future(steps.get())
            done, _ = await asyncio.wait({step, task}, return_when=asyncio.FIRST_COMPLETED)
            if step in done:
                yield {"event": "step", "data": json.dumps(step.result())}
                continue
            step.cancel()
            while not steps.empty():
                yield {"event": "step", "data": json.dumps(steps.get_nowait())}
            break
        try:
            yield {"event": "answer", "data": json.dumps(task.result())}
        except ServeError as exc:
            yield {"event": "error", "data": json.dumps(exc.body() | {"status": exc.status})}
        except Exception:  # noqa: BLE001 - the stream reports it; the server goes on
            log.exception("stream failed")
            yield {"event": "error", "data": json.dumps({"error": "internal error; the server's log has "
                                                                  "the details", "status": 500})}
    finally:  # the client left (or the stream ended): a search still running stops at its next step
        if not task.done():
            cancel.set()
            log.info("stream client went away: its search stops at the next step")


def _add_page(app: FastAPI) -> None:
    """The page the tree is drawn on: GET / and its files under /static."""
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/")
    async def page():
        return FileResponse(STATIC / "index.html")


def program_info(program: dspy.Module, name: str, lm: dspy.BaseLM, dataset: str | None,
                 recipe: dict | None = None) -> dict:
    """What `/v1/program` reports about a served program."""
    compile_info = (recipe or {}).get("compile") or {}
    return {"program": name, "settings": getattr(program, "method_settings", {}),
            "optimizer": compile_info.get("optimizer") or ("zero-shot" if recipe is None else None),
            "demos": {pname: len(p.demos) for pname, p in program.named_predictors()},
            "dataset": dataset, "model": getattr(lm, "model", str(lm))}
