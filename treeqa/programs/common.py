"""What every program shares: input checks, the retriever reference (and `Retrieving`, the base
of a program that needs one), safe LM calls, and sending one search level's independent calls
together.

A failed LM call (a parse error, a timeout, a server error) is recorded and never fails
the question; a programming error in treeqa's own code is not an LM failure and propagates,
so a bug fails a test instead of becoming an empty answer.

The embedded model serves one call at a time (two cores gain nothing from overlap), so
programs default to `threads=1` and run in order; against a remote endpoint, `threads > 1`
sends sibling calls together, each in a copy of the caller's context (DSPy's settings and its
usage tracker go with it).
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

import dspy

from treeqa.programs.contract import QAProgram
from treeqa.retrievers.base import Retriever
from treeqa.settings import redact

T = TypeVar("T")
R = TypeVar("R")

_NON_WORD = re.compile(r"[\W_]+")
log = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 2000  # a question, not a document: longer input would crowd the prompts out
PROGRAMMING_ERRORS = (TypeError, AttributeError, KeyError, NameError)
_OURS = str(Path(__file__).resolve().parent.parent)  # the treeqa package
_LIBRARIES = tuple(str(Path(m.__file__).resolve().parent) for m in (dspy,))


# --- input checks ----------------------------------------------------------------------------

def check_question(question: object, program: str) -> str:
    """The question stripped; a blank, over-long or undecodable question is a caller error,
    not an LM failure."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{program}: the question is empty")
    question = question.strip()
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"{program}: the question is {len(question):,} characters; at most {MAX_QUESTION_CHARS:,}")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: bytes from the shell that were not UTF-8
        raise ValueError(f"{program}: the question is not valid UTF-8 text (at character {exc.start})") from None
    return question


def text_key(text: object) -> str:
    """What makes two questions, queries or reasoning sentences the same: their words, lowercased
    (case, punctuation and spacing ignored; a small model repeating itself changes little more)."""
    return " ".join(_NON_WORD.sub(" ", str(text or "").lower()).split())


def repeat_of(text: str, earlier: Sequence[str]) -> int | None:
    """The position (from 1) of the first of `earlier` that `text` repeats (`text_key`), or None.
    The step-by-step programs stop, or ask again, on a repeat: its search finds nothing new."""
    key = text_key(text)
    return next((i for i, seen in enumerate(earlier, start=1) if text_key(seen) == key), None)


def check_retriever(retriever: Retriever | None, program: str, needed: bool) -> None:
    """Fail at construction, not at the first question, when a retrieving program has no retriever."""
    if needed and retriever is None:
        raise ValueError(f"{program} retrieves passages and needs a retriever (got None)")
    if retriever is not None and not callable(getattr(retriever, "search", None)):
        raise ValueError(f"{program}: the retriever must have a search(query, k) method")


def check_ints(least: int = 1, /, **settings: object) -> None:
    """Refuse the first setting, in the order given, that is not an integer >= `least` (a bool is
    not one): `check_ints(k=k, rounds=rounds)`, `check_ints(50, passage_chars=passage_chars)`."""
    for name, value in settings.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}; got {value!r}")


def check_threads(threads: int) -> int:
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    return threads


class SharedRef:
    """Holds an object that every copy of a program shares.

    Optimizers deep-copy programs for each candidate; a retriever (faiss index, encoder) is
    not a parameter, so copies must point at the same one instead of duplicating it."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


class Retrieving(QAProgram):
    """Base of a program that cannot answer without searching: its constructor refuses a missing
    retriever (or one without `search`), and every copy of the program shares the one it was
    given (`retriever`, held in a `SharedRef`).

    A subclass calls `super().__init__(retriever)` first; its own constructor's arguments are its
    settings. No `name`, so this base is not registered as a program."""

    retrieves = True

    def __init__(self, retriever: Retriever | None):
        super().__init__()
        check_retriever(retriever, type(self).__name__, needed=True)
        self._retriever = SharedRef(retriever)

    @property
    def retriever(self) -> Retriever:
        return self._retriever.value


# --- LM calls -----------------------------------------------------------------------------------

def record_failure(failures: list[dict], where: str, exc: BaseException) -> None:
    message = redact(str(exc))  # an endpoint's error may echo the request's Authorization header
    failures.append({"where": where, "error": type(exc).__name__, "message": message[:500]})
    log.warning("LM call %s failed: %s: %s", where, type(exc).__name__, message[:200])


def _raised_by_us(exc: BaseException) -> bool:
    owner = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(_OURS):
            owner = "ours"
        elif filename.startswith(_LIBRARIES):
            owner = "library"
        tb = tb.tb_next
    return owner == "ours"


def is_our_bug(exc: BaseException) -> bool:
    """A TypeError, AttributeError, KeyError or NameError whose innermost frame in treeqa or
    DSPy is treeqa's (also when DSPy wrapped it, e.g. in LMUnexpectedError): our code misused
    something, no LM reply caused it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, PROGRAMMING_ERRORS) and _raised_by_us(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def safe_call(predictor: Callable[..., dspy.Prediction], failures: list[dict], where: str,
              **inputs) -> dspy.Prediction | None:
    """Run `predictor(**inputs)`; on an LM-side error (parse failure, timeout, server error)
    record it in `failures` under `where` and return None, so the caller can drop or
    down-score that branch. A bug in treeqa's own code (`is_our_bug`) propagates.

    Each list or dict input is passed as a copy: DSPy's trace keeps the very objects a call was
    given, and those traces become the demos a teleprompter bootstraps. Hop appended each hop's
    notes to the list it had passed, so its compiled query demos showed the question's final
    notes as the first hop's input, not the notes that call had seen."""
    inputs = {name: list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
              for name, value in inputs.items()}
    try:
        return predictor(**inputs)
    except Exception as exc:  # noqa: BLE001 - every LM-side failure is recorded, none propagates
        if is_our_bug(exc):
            raise
        if no_lm(predictor):
            raise NoLMError("no LM is configured: call treeqa.lm.configure('local') (or dspy.configure(lm=...)) "
                            "before calling a program") from exc
        record_failure(failures, where, exc)
        return None


class NoLMError(RuntimeError):
    """A program was called with no LM configured: not a failed call to record, the caller's setup."""


def no_lm(predictor) -> bool:
    """Whether neither DSPy's settings nor `predictor` (or any predictor inside it) has an LM."""
    if dspy.settings.lm is not None:
        return False
    inner = predictor.predictors() if callable(getattr(predictor, "predictors", None)) else [predictor]
    return all(getattr(p, "lm", None) is None for p in inner)


def map_calls(fn: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """`[fn(x) for x in items]`, in order; concurrent when threads > 1. `fn` must not raise.

    Each call runs in a copy of the caller's context, so DSPy's settings (LM, adapter, callbacks)
    and the caller's usage tracker are the caller's own: DSPy's ParallelExecutor gives each
    worker a deep copy of the tracker, and the calls it made were missing from a question's
    `lm_calls` and tokens."""
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="treeqa-calls") as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        return [future.result() for future in futures]


# --- search steps, as they happen ------------------------------------------------------------

_listener: ContextVar[Callable[[dict], None] | None] = ContextVar("treeqa_step_listener", default=None)


@contextmanager
def listening(callback: Callable[[dict], None]) -> Iterator[None]:
    """Send every search step a program takes in this context to `callback` (the serving app
    streams them); programs emit from their orchestrating thread, so one listener sees all."""
    token = _listener.set(callback)
    try:
        yield
    finally:
        _listener.reset(token)


def emit(event: dict) -> None:
    """Tell the listener, if any, about one search step (a reviewed node, a scored state). A
    failing listener is logged and never fails the search."""
    callback = _listener.get()
    if callback is None:
        return
    try:
        callback(event)
    except Exception as exc:  # noqa: BLE001 - a broken stream must not break the answer
        log.warning("step listener failed: %s: %s", type(exc).__name__, exc)
