"""Independent LM calls of one search level, concurrently when an endpoint can take them.

The embedded model serves one call at a time (two cores gain nothing from overlap), so
programs default to `threads=1` and run in order; against a remote endpoint, `threads > 1`
sends sibling calls together. DSPy's ParallelExecutor carries the caller's settings (LM,
adapter, usage tracker, callbacks) into each worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_calls(fn: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """`[fn(x) for x in items]`, in order; concurrent when threads > 1. `fn` must not raise."""
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    from dspy.utils.parallelizer import ParallelExecutor

    executor = ParallelExecutor(num_threads=min(threads, len(items)), disable_progress_bar=True,
                                max_errors=len(items) + 1, timeout=600)
    return executor.execute(fn, list(items))


def check_threads(threads: int) -> int:
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    return threads
