"""Running a program over examples: one JSON record per example, appended as each finishes.

A run writes to a JSONL file; running again with the same file skips the examples already
there, so an interrupted evaluation loses nothing. A question whose program raises is
recorded with its error and scores 0; the others go on.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import dspy
from dspy.dsp.utils.settings import thread_local_overrides
from dspy.utils.callback import BaseCallback
from tqdm import tqdm

from treeqa.data.answers import RECALL_K
from treeqa.evaluation.metrics import answer_hit_at_k, exact_match, f1_score, recall_at_k
from treeqa.evaluation.records import (
    failed,
    open_for_append,
    read_records,
    refuse_compressed,
    rewrite_records,
    summarize,
)
from treeqa.settings import redact


class ParseCounter(BaseCallback):
    """Counts adapter parse attempts and failures per signature; a failure costs DSPy a retry."""

    def __init__(self):
        self._names: dict[str, str] = {}
        self.attempts: dict[str, int] = {}
        self.failures: dict[str, int] = {}

    def on_adapter_parse_start(self, call_id, instance, inputs):
        signature = inputs.get("signature")
        self._names[call_id] = getattr(signature, "__name__", str(signature))

    def on_adapter_parse_end(self, call_id, outputs, exception=None):
        name = self._names.pop(call_id, "?")
        self.attempts[name] = self.attempts.get(name, 0) + 1
        if exception is not None:
            self.failures[name] = self.failures.get(name, 0) + 1


class YesNoDecisions(BaseCallback):
    """The yes/no decisions a calibrated reader made (its written answer, P("yes"), the bias, what it
    answered), so a record shows whether the calibration moved an answer."""

    def __init__(self):
        self.decisions: list = []

    def on_module_end(self, call_id, outputs, exception=None):
        decision = getattr(outputs, "yes_no_calibration", None) if exception is None else None
        # a program that hands its reader's prediction back ends with the same object: counted once
        if decision is not None and all(d is not decision for d in self.decisions):
            self.decisions.append(decision)


class LmTimeByPredictor(BaseCallback):
    """LM calls and their seconds per predictor, so a run says where its LM time goes.

    Each LM call is put down to the innermost `dspy.Predict` DSPy has on its call stack
    (`settings.caller_modules`, which an endpoint call's worker thread inherits with the
    caller's context), named as the program names it (`review`, `answer.predict`); a predictor
    the program does not list goes by its signature's name, and a call made outside any
    predictor is "other". Counted are the calls that reach `dspy.LM` (each retry of an endpoint
    is one; an endpoint's response-cache hit none; the embedded LM's cache hits are, at about a
    millisecond), so with the cache off they are the record's LM calls. Seconds are wall time
    around each call; calls made in parallel overlap.

    Args:
        names: `id(predictor)` -> its name in the program (`named_predictors`).
    """

    def __init__(self, names: dict[int, str] | None = None):
        self._names = names or {}
        self._started: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._seconds: dict[str, float] = {}

    def _caller(self) -> str:
        predict = next((m for m in reversed(dspy.settings.caller_modules or []) if isinstance(m, dspy.Predict)), None)
        if predict is None:
            return "other"
        return self._names.get(id(predict)) or getattr(predict.signature, "__name__", "other")

    def on_lm_start(self, call_id, instance, inputs):
        name = self._caller()
        with self._lock:
            self._started[call_id] = (name, time.perf_counter())

    def on_lm_end(self, call_id, outputs, exception=None):
        ended = time.perf_counter()
        with self._lock:
            name, started = self._started.pop(call_id, ("other", ended))
            self._calls[name] = self._calls.get(name, 0) + 1
            self._seconds[name] = self._seconds.get(name, 0.0) + ended - started

    def figures(self) -> tuple[dict[str, int], dict[str, float]]:
        """(calls, seconds) by predictor, copied: a call abandoned past its deadline may still end later."""
        with self._lock:
            return dict(self._calls), {name: round(sec, 3) for name, sec in self._seconds.items()}


def _retrieved(prediction: Any) -> list | None:
    """The passages a program saw, first-retrieved first; None for a program that retrieves none."""
    retrieved = getattr(prediction, "retrieved", None) if prediction is not None else None
    return None if retrieved is None else list(retrieved)


def _usage(tracker) -> dict[str, int]:
    calls = prompt = completion = cached = 0
    for entries in tracker.usage_data.values():
        for entry in entries:
            calls += 1
            prompt += entry.get("prompt_tokens") or 0
            completion += entry.get("completion_tokens") or 0
            cached += (entry.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {"lm_calls": calls, "prompt_tokens": prompt, "completion_tokens": completion,
            "prompt_tokens_cached": cached}


def _engine_stats(program: dspy.Module, lm: dspy.LM | None) -> list:
    """The call clocks of every embedded engine a question may use: the run's LM's, and each of a
    predictor's own LM (a reader's adapter runs on an engine of its own, which the run's LM does
    not time: its seconds read as overhead, 40% of the ToR + v4 run's)."""
    found = {}
    for candidate in (lm, *(predictor.lm for _, predictor in program.named_predictors())):
        stats = getattr(getattr(candidate, "_engine_spec", None), "stats", None)
        if stats is not None:
            found.setdefault(id(stats), stats)
    return list(found.values())


def run_example(program: dspy.Module, example: dspy.Example, lm: dspy.LM | None = None,
                keep_tree: bool = True, adapter: dspy.Adapter | None = None) -> dict:
    """Run one example and score it; never raises for a failure inside the program."""
    record: dict[str, Any] = {"id": example.id, "question": example.question, "answers": list(example.answers)}
    prediction, error = None, None
    engines = _engine_stats(program, lm)
    lm_seconds_before = [stats.seconds for stats in engines]
    started = time.perf_counter()
    parses = ParseCounter()
    timing = LmTimeByPredictor({id(p): name for name, p in program.named_predictors()})
    yes_no = YesNoDecisions()
    callbacks = [*dspy.settings.get("callbacks", []), parses, timing, yes_no]
    context = dict(callbacks=callbacks)
    if lm is not None:  # the run's own LM and adapter, over whatever the caller set
        context["lm"] = lm
    if adapter is not None:
        context["adapter"] = adapter
    with dspy.context(**context), dspy.track_usage() as tracker:
        try:
            prediction = program(**example.inputs())
        except Exception as exc:  # noqa: BLE001 - recorded for this example, the run goes on
            error = redact(f"{type(exc).__name__}: {exc}")[:1000]
    record["seconds"] = round(time.perf_counter() - started, 3)
    if engines:  # the embedded engines time their own calls: the rest is retrieval, the judge, parsing
        record["lm_seconds"] = round(sum(s.seconds - b for s, b in zip(engines, lm_seconds_before, strict=True)), 3)
    record.update(_usage(tracker))
    answer = str(getattr(prediction, "answer", "") or "") if prediction is not None else ""
    record["prediction"] = answer
    record["em"] = exact_match(answer, example.answers)
    record["f1"] = round(f1_score(answer, example.answers), 4)
    retrieved = _retrieved(prediction)
    gold = example.get("gold_ids")
    if retrieved is not None and gold:
        record[f"recall@{RECALL_K}"] = round(recall_at_k([p.id for p in retrieved], gold, RECALL_K), 4)
    if retrieved is not None:  # where no gold passage is annotated (TriviaQA, WebQ) the only retrieval figure
        record[f"answer_hit@{RECALL_K}"] = answer_hit_at_k([p.text for p in retrieved], example.answers, RECALL_K)
    failures = list(getattr(prediction, "failures", None) or []) if prediction is not None else []
    record["parse_attempts"] = dict(parses.attempts)
    record["parse_failures"] = dict(parses.failures)
    record["lm_calls_by_predictor"], record["lm_seconds_by_predictor"] = timing.figures()
    record["failed_calls"] = len(failures)
    if failures:
        record["failures"] = failures
    if yes_no.decisions:
        record["yes_no_calibration"] = yes_no.decisions
    if error:
        record["error"] = error
    if keep_tree and prediction is not None and getattr(prediction, "tree", None) is not None:
        record["tree"] = prediction.tree
    return record


def over_budget(example: dspy.Example, budget: float) -> dict:
    """The record of a question that ran past its time budget: a failure, retried by --retry-failed."""
    return {"id": example.id, "question": example.question, "answers": list(example.answers), "prediction": "",
            "em": 0.0, "f1": 0.0, "seconds": budget, "lm_calls": 0, "failed_calls": 1,
            "error": f"TimeoutError: the question ran past its {budget:g} s budget"}


class RunAborted(RuntimeError):
    """Too many questions in a row got no answer because every LM call failed."""


def all_calls_failed(record: dict) -> bool:
    """The question raised, or it has failed calls and no answer: nothing reached the LM and back."""
    return bool(record.get("error")) or (record.get("failed_calls", 0) > 0 and not record.get("prediction"))


def _as_finished(run: Callable[[dspy.Example], dict], todo: list[dspy.Example], threads: int,
                 budget: float | None) -> Iterator[dict]:
    """Each question's record as it finishes, at most `threads` questions running at a time.

    With one thread and no budget the questions run here, one after another. Otherwise each
    runs in a thread of its own that puts its record on a queue, and this thread waits on the
    queue no longer than the earliest running question's deadline: a question past `budget`
    seconds gets the `over_budget` record then, whatever else runs, and its place goes to the
    next question. Its late run is left to finish in its thread (a running LM call cannot be
    interrupted) and its record is dropped. Why not DSPy's `ParallelExecutor`: its `timeout`
    resubmits a straggler (the same question run twice, on the LM's time) instead of ending
    it, and it hands the results back only when all are done, so no record could be appended
    as its question finishes.
    """
    if threads <= 1 and budget is None:
        yield from map(run, todo)
        return
    finished: queue.SimpleQueue = queue.SimpleQueue()
    waiting = deque(enumerate(todo))
    # what the caller set with dspy.context (callbacks, settings) reaches the questions' threads, as
    # DSPy's own executor passes it; each question tracks its own usage, so the tracker stays here
    inherited = {k: v for k, v in thread_local_overrides.get().items() if k != "usage_tracker"}
    running: dict[int, tuple[dspy.Example, float]] = {}  # place in todo -> (example, deadline)

    def work(index: int, example: dspy.Example) -> None:
        thread_local_overrides.set({**thread_local_overrides.get(), **inherited})
        try:
            finished.put((index, run(example)))
        except Exception as exc:  # noqa: BLE001 - raised again in the caller's thread
            finished.put((index, exc))

    while waiting or running:
        while waiting and len(running) < max(threads, 1):
            index, example = waiting.popleft()
            running[index] = (example, time.monotonic() + budget if budget is not None else math.inf)
            threading.Thread(target=work, args=(index, example), daemon=True,
                             name=f"treeqa-question-{example.id}").start()
        now = time.monotonic()
        late = [index for index, (_, deadline) in running.items() if deadline <= now]
        for index in late:
            yield over_budget(running.pop(index)[0], budget)
        if late:
            continue
        deadline = min(deadline for _, deadline in running.values())
        try:
            index, outcome = finished.get(timeout=None if deadline == math.inf else deadline - now)
        except queue.Empty:
            continue
        if running.pop(index, None) is None:
            continue  # past its budget: recorded already
        if isinstance(outcome, Exception):
            raise outcome
        yield outcome


class _RecordSink:
    """Takes the finished questions' records, in the caller's thread: stamps each with the run
    key, appends it to `out_path` at once (a rerun skips it), moves the progress bar, and
    raises `RunAborted` after `max_errors` questions in a row whose LM calls all failed."""

    def __init__(self, done: dict[str, dict], examples: list[dspy.Example], out_path: Path | None, bar,
                 run_key: str | None, max_errors: int | None):
        self.done, self.examples, self.bar = done, examples, bar
        self.run_key, self.max_errors = run_key, max_errors
        self.streak = 0
        self._file = open_for_append(out_path) if out_path is not None else None

    def add(self, record: dict) -> None:
        if self.run_key is not None:
            record["run"] = self.run_key
        self.done[record["id"]] = record
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()
        self.streak = self.streak + 1 if all_calls_failed(record) else 0
        if self.max_errors is not None and self.streak >= self.max_errors:
            last = record.get("error") or (record.get("failures") or [{}])[-1]
            raise RunAborted(f"stopped after {self.streak} questions in a row whose LM calls all failed "
                             f"(last: {last}); check the LM, then rerun with --retry-failed")
        scored = [self.done[ex.id] for ex in self.examples if ex.id in self.done]
        self.bar.set_postfix(em=f"{100 * mean(r['em'] for r in scored):.1f}")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
        if self._file is not None:
            self._file.close()


def _earlier_records(out_path: Path, run_key: str | None, retry_failed: bool) -> dict[str, dict]:
    """The records already in `out_path` by id (less the failed ones with `retry_failed`, which are
    rewritten out of the file); records of another run key are refused, and so is a file whose
    records are compressed beside it (appending would start a second file)."""
    refuse_compressed(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = {r["id"]: r for r in read_records(out_path)}
    foreign = {r.get("run") for r in done.values() if r.get("run", run_key) != run_key}
    if run_key is not None and foreign:
        raise ValueError(f"{out_path} holds records of another run spec ({', '.join(map(str, foreign))}; "
                         f"this one is {run_key}): use another output folder")
    if retry_failed and any(failed(r) for r in done.values()):
        done = {i: r for i, r in done.items() if not failed(r)}
        rewrite_records(out_path, list(done.values()))
    return done


def evaluate(program: dspy.Module, examples: list[dspy.Example], lm: dspy.LM | None = None,
             out_path: Path | None = None, threads: int = 1, progress: bool = True,
             keep_tree: bool = True, desc: str = "evaluating", adapter: dspy.Adapter | None = None,
             run_key: str | None = None, retry_failed: bool = False, max_errors: int | None = 10,
             question_budget: float | None = None) -> dict[str, Any]:
    """Evaluate `program` on `examples`, resuming from `out_path` when it holds earlier records.

    Args:
        threads: questions run at once; records are appended in the order the questions finish.
        run_key: the spec's hash; every record carries it, and records of another key in
            `out_path` are refused rather than reported as this run's.
        retry_failed: run again the questions whose records hold a failure (see `failed`).
        max_errors: stop with `RunAborted` after this many questions in a row whose LM calls
            all failed (a dead endpoint), instead of filling the run with empty answers; the
            records so far are kept, and `retry_failed` picks the run up. None never stops.
        question_budget: seconds one question may take; a question past it is recorded as
            failed (`over_budget`) and the run moves on (see `_as_finished`).

    Returns the summary figures (see `summarize`) and the records, in example order.
    """
    out_path = Path(out_path) if out_path is not None else None
    done = _earlier_records(out_path, run_key, retry_failed) if out_path is not None else {}
    todo = [ex for ex in examples if ex.id not in done]
    bar = tqdm(total=len(examples), initial=len(examples) - len(todo), desc=desc, disable=not progress,
               unit="q", dynamic_ncols=True)
    sink = _RecordSink(done, examples, out_path, bar, run_key, max_errors)
    try:
        for record in _as_finished(lambda ex: run_example(program, ex, lm, keep_tree, adapter), todo, threads,
                                   question_budget):
            sink.add(record)
    finally:
        sink.close()
    records = [done[ex.id] for ex in examples]
    return {"summary": summarize(records), "records": records}
