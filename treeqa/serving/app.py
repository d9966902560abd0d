"""Serve a (compiled) program over HTTP, with a page that draws its search tree live.

    POST /v1/ask          {"question": ...} -> answer, confidence, passages, tree, failures, costs
    POST /v1/ask/stream   the same as server-sent events: one "step" per search step (a reviewed
                          paragraph, a scored state) as the program takes it, then "answer"
    GET  /v1/program      what is served: program, settings, optimizer, demos, dataset, model
    GET  /healthz         liveness
    GET  /                the page (plain HTML/JS/CSS shipped in treeqa/serving/static)

The embedded engine serves one call at a time, so requests run one at a time and wait in a
bounded queue (503 with Retry-After when it is full); against an endpoint `concurrency`
requests run at once. Each request has a time limit (504), its body a deadline to arrive in
(408, and the connection closed), questions a length limit (413), and errors come back as JSON
`{"error": ...}`; a question whose LM calls all failed is 502 (504 where the LM timed out), not
an empty answer. The model runs in worker threads: the event loop never blocks on it.

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
import traceback
from pathlib import Path

import dspy
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

# each concept lives in its own module; the names this module held before are re-exported
from treeqa.serving.body import BODY_TIMEOUT, MAX_BODY_BYTES, AskRequest, read_question
from treeqa.serving.errors import ServeError, no_answer, public_failure, scrub
from treeqa.serving.hosts import LOOPBACK_NAMES, WILDCARD_ADDRESSES, HostCheck, allowed_hosts_for, host_name
from treeqa.serving.runner import PASSAGE_CHARS, Cancelled, Runner, Served
from treeqa.settings import redact

__all__ = ["BODY_TIMEOUT", "MAX_BODY_BYTES", "LOOPBACK_NAMES", "PASSAGE_CHARS", "STATIC", "WILDCARD_ADDRESSES",
           "AskRequest", "Cancelled", "HostCheck", "Runner", "ServeError", "Served", "allowed_hosts_for", "create_app",
           "host_name", "no_answer", "program_info", "public_failure", "read_question", "scrub"]

STATIC = Path(__file__).parent / "static"

log = logging.getLogger(__name__)


def create_app(served: Served, concurrency: int = 1, queue_size: int = 8, time_limit: float = 300.0,
               allowed_hosts: frozenset[str] | None = None, body_timeout: float = BODY_TIMEOUT) -> FastAPI:
    """The FastAPI app for `served` (see the module docstring for the routes); `allowed_hosts`
    (`allowed_hosts_for`) are the Host names it answers to, the loopback names by default; a
    request body must arrive within `body_timeout` seconds."""
    if not body_timeout > 0:
        raise ValueError(f"body_timeout must be a positive number of seconds (got {body_timeout})")
    app = FastAPI(title="treeqa", description="Question answering by search, served.")
    allowed = allowed_hosts if allowed_hosts is not None else allowed_hosts_for("127.0.0.1")
    app.add_middleware(HostCheck, allowed=allowed)
    runner = Runner(served, concurrency, queue_size, time_limit)
    app.state.runner = runner
    _add_error_handlers(app)
    _add_info_routes(app, served)
    _add_ask_routes(app, runner, body_timeout)
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
        log_failure("request failed", exc)  # the details stay in the server's log
        return JSONResponse({"error": "internal error; the server's log has the details"}, status_code=500)


def log_failure(what: str, exc: BaseException) -> None:
    """The traceback in the server's log, keys scrubbed: an upstream's error may echo the
    request's Authorization header, and a log is a file."""
    log.error("%s\n%s", what, redact("".join(traceback.format_exception(exc))).rstrip())


def _add_info_routes(app: FastAPI, served: Served) -> None:
    """GET /healthz and GET /v1/program: what needs no LM call."""

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/v1/program")
    async def program_info():
        return served.info


def _add_ask_routes(app: FastAPI, runner: Runner, body_timeout: float = BODY_TIMEOUT) -> None:
    """POST /v1/ask and /v1/ask/stream, both through `runner`; each refuses a full queue before
    reading the body (and, streaming, before the stream opens, so with a proper status)."""

    @app.post("/v1/ask")
    async def ask(request: Request):
        runner.check_capacity()  # the queue limit applies before the body is read
        return await runner.run(await read_question(request, body_timeout))

    @app.post("/v1/ask/stream")
    async def ask_stream(request: Request):
        runner.check_capacity()  # refuse before the body is read and the stream opens, with a proper status
        question = await read_question(request, body_timeout)
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
        except Exception as exc:  # noqa: BLE001 - the stream reports it; the server goes on
            log_failure("stream failed", exc)
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
                 compiled=None) -> dict:
    """What `/v1/program` reports about a served program (`compiled`: its CompiledFile, if any)."""
    compile_info = compiled.compile if compiled is not None else {}
    return {"program": name, "settings": getattr(program, "method_settings", {}),
            "optimizer": compile_info.get("optimizer") or ("zero-shot" if compiled is None else None),
            "demos": {pname: len(p.demos) for pname, p in program.named_predictors()},
            "dataset": dataset, "model": getattr(lm, "model", str(lm))}
