"""What the integration tests share: one real question asked of a program under the embedded
model, measured (its LM calls and seconds) and summarised as each test module reports it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import dspy


def run_measured(program, lm, example, summarize: Callable[..., dict]) -> tuple[dspy.Prediction, dict]:
    """Ask `program` the example's question through the default path (the adapter `adapter_for`
    picks: JSON under a grammar), counting the embedded engine's calls and the seconds it took.
    `summarize(program, example, pred, measured)` writes the summary from those (`measured`
    holds `lm_calls` and `seconds`); it is printed as JSON. Returns the prediction and the summary."""
    from treeqa.lm import adapter_for, local_engine

    engine = local_engine()
    calls_before, started = engine.stats.calls, time.perf_counter()
    with dspy.context(lm=lm, adapter=adapter_for(lm)):  # the default path: JSON under a grammar
        pred = program(question=example.question)
    measured = {"lm_calls": engine.stats.calls - calls_before, "seconds": round(time.perf_counter() - started, 1)}
    summary = summarize(program, example, pred, measured)
    print("\n" + json.dumps(summary, indent=1))
    return pred, summary
