"""The queue that runs questions: the model works in worker threads, a bounded number at once,
so the event loop never blocks on it and the embedded engine is never shared."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import dspy

from treeqa.data.answers import RECALL_K
from treeqa.programs.common import listening
from treeqa.serving.errors import ServeError, no_answer, public_failure, scrub
from treeqa.settings import redact

PASSAGE_CHARS = 1200  # passages in a response are cut to this length

log = logging.getLogger(__name__)


class Cancelled(BaseException):
    """Raised inside a search whose client has gone away (a BaseException, so no LM-failure
    handler records it as a failed call); the search stops at its next step."""


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
                        redact(str(failure.get("message")))[:500])
        if not out["answer"].strip() and out["failures"]:
            raise no_answer(out["failures"])
        return scrub(json.loads(json.dumps(out, default=str)))  # plain JSON, whatever the tree holds

