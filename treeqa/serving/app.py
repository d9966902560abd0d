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
and errors come back as JSON `{"error": ...}`. The model runs in worker threads: the event
loop never blocks on it.
"""

from __future__ import annotations

import asyncio
import json
import logging
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
from pydantic import BaseModel
from sse_starlette.sse import EventSourceResponse

from treeqa.metrics import RECALL_K
from treeqa.programs.common import MAX_QUESTION_CHARS, check_question, listening

STATIC = Path(__file__).parent / "static"
PASSAGE_CHARS = 1200  # passages in a response are cut to this length

log = logging.getLogger(__name__)


class AskRequest(BaseModel):
    question: str


class ServeError(Exception):
    """An error with its HTTP status, sent as `{"error": message}`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


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

    async def run(self, question: str, listener=None) -> dict:
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

        future = loop.run_in_executor(self._pool, self._answer, question, listener)
        future.add_done_callback(finished)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise ServeError(504, f"the answer took longer than the {self.time_limit:g} s time limit") from None

    def _answer(self, question: str, listener) -> dict:
        served = self.served
        started = time.perf_counter()
        context = {"lm": served.lm} | ({"adapter": served.adapter} if served.adapter is not None else {})
        with dspy.context(**context), dspy.track_usage() as usage, listening(listener or (lambda event: None)):
            prediction = served.program(question=question)
        calls = [entry for entries in usage.usage_data.values() for entry in entries]
        out: dict[str, Any] = {
            "question": question,
            "answer": str(getattr(prediction, "answer", "") or ""),
            "passages": [{"id": p.id, "title": p.title, "text": p.text[:PASSAGE_CHARS]}
                         for p in (getattr(prediction, "retrieved", None) or [])[:RECALL_K]],
            "tree": getattr(prediction, "tree", None),
            "failures": list(getattr(prediction, "failures", None) or []),
            "lm_calls": len(calls),
            "prompt_tokens": sum(e.get("prompt_tokens") or 0 for e in calls),
            "completion_tokens": sum(e.get("completion_tokens") or 0 for e in calls),
            "seconds": round(time.perf_counter() - started, 3),
        }
        if getattr(prediction, "confidence", None) is not None:
            out["confidence"] = float(prediction.confidence)
        return json.loads(json.dumps(out, default=str))  # plain JSON, whatever the tree holds


def _question(body: AskRequest) -> str:
    if len(body.question) > MAX_QUESTION_CHARS:
        raise ServeError(413, f"the question is {len(body.question):,} characters; at most {MAX_QUESTION_CHARS:,}")
    try:
        return check_question(body.question, "ask")
    except ValueError as exc:
        raise ServeError(422, str(exc)) from None


def create_app(served: Served, concurrency: int = 1, queue_size: int = 8, time_limit: float = 300.0) -> FastAPI:
    """The FastAPI app for `served` (see the module docstring for the routes)."""
    app = FastAPI(title="treeqa", description="Question answering by search, served.")
    runner = Runner(served, concurrency, queue_size, time_limit)
    app.state.runner = runner

    @app.exception_handler(ServeError)
    async def serve_error(request: Request, exc: ServeError):
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        messages = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": f"bad request: {messages}"}, status_code=422)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception):
        log.exception("request failed")
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/v1/program")
    async def program_info():
        return served.info

    @app.post("/v1/ask")
    async def ask(body: AskRequest):
        return await runner.run(_question(body))

    @app.post("/v1/ask/stream")
    async def ask_stream(body: AskRequest):
        question = _question(body)
        runner.check_capacity()  # refuse before the stream opens, with a proper status
        loop = asyncio.get_running_loop()
        steps: asyncio.Queue = asyncio.Queue()

        def listener(event: dict) -> None:  # called in the worker thread
            loop.call_soon_threadsafe(steps.put_nowait, json.loads(json.dumps(event, default=str)))

        async def events():
            task = asyncio.ensure_future(runner.run(question, listener))
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
                yield {"event": "error", "data": json.dumps({"error": exc.message, "status": exc.status})}
            except Exception as exc:  # noqa: BLE001 - the stream reports it; the server goes on
                log.exception("stream failed")
                yield {"event": "error", "data": json.dumps({"error": f"{type(exc).__name__}: {exc}", "status": 500})}

        return EventSourceResponse(events())

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/")
    async def page():
        return FileResponse(STATIC / "index.html")

    return app


def program_info(program: dspy.Module, name: str, lm: dspy.BaseLM, dataset: str | None,
                 recipe: dict | None = None) -> dict:
    """What `/v1/program` reports about a served program."""
    compile_info = (recipe or {}).get("compile") or {}
    return {"program": name, "settings": getattr(program, "method_settings", {}),
            "optimizer": compile_info.get("optimizer") or ("zero-shot" if recipe is None else None),
            "demos": {pname: len(p.demos) for pname, p in program.named_predictors()},
            "dataset": dataset, "model": getattr(lm, "model", str(lm))}
