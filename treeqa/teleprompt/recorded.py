"""Compile a program's reader on recorded inputs: one LM call per evaluated example.

Compiling a whole search program against EM costs a whole search per evaluated example (ToR:
4-6 calls, 14-20 s on two cores), so a teleprompter that scores candidates on 100 questions is
out of reach. Most of what decides EM once the search has run is the last call, the reader
(`reader` in the program's contract: ToR's and CoR's `fuse`, the beam's and rta's `answer`). So
`RecordedReader` runs the prepared program over the train questions once, keeps each question's
final reader inputs with its gold answers (a JSONL file, resumed when the compile is run again),
and then lets a DSPy teleprompter optimise that one predictor on those inputs, each candidate
scored by EM with one LM call per example. The compiled demos and instructions go back onto
the program; everything else (a path judge, other predictors' demos) stays as prepared. Demos
are drawn only from reads short enough that they fit the model's window beside any read
(`one_predictor.demo_pool`).
Each of the reader's answers is logged beside the reads (`one_predictor.PredictorCalls`), so a
compile stopped anywhere, or moved to a machine without DSPy's cache, replays them instead of
calling again; the reader as prepared is kept unless a candidate beats it (`keep_better`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt import MIPROv2
from dspy.teleprompt.teleprompt import Teleprompter
from tqdm import tqdm

from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.metrics import em_metric
from treeqa.teleprompt.one_predictor import OnePredictor, PredictorCalls, demo_pool, keep_better, random_search, score

log = logging.getLogger(__name__)
TELEPROMPTERS = ("random-search", "mipro")


def reader_of(program: dspy.Module) -> tuple[str, dspy.Predict]:
    """(name, predictor) of the program's reader, as its contract declares it."""
    name = getattr(type(program), "reader", None)
    predictors = dict(program.named_predictors())
    if not name or name not in predictors:
        raise ValueError(f"{type(program).__name__} declares no reader to compile on recorded inputs")
    return name, predictors[name]


def record_reads(program: dspy.Module, trainset: Sequence[dspy.Example], path: Path | None,
                 progress: bool = True) -> list[dict[str, Any]]:
    """Each train question's final reader inputs and gold answers, appended to `path` as they
    finish (a rerun skips the questions already there), with a progress bar: on two cores this
    is a whole search per question, tens of minutes before the compile itself starts. A
    question whose reader was never called (every call failed) is recorded without inputs and
    skipped by the compile."""
    name, reader = reader_of(program)
    done: dict[str, dict] = {}
    if path is not None and path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # a line torn by a kill (or no record at all): that question is run again
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                done[record["id"]] = record
    sink = path.open("a", encoding="utf-8") if path is not None else None
    todo = [example for example in trainset if example.id not in done]
    bar = tqdm(total=len(trainset), initial=len(trainset) - len(todo), desc="recording the reader's inputs",
               unit="q", disable=not progress)
    try:
        for example in todo:
            with dspy.context(trace=[]):
                try:
                    program(**example.inputs())
                except Exception as exc:  # noqa: BLE001 - recorded for this question, the others go on
                    log.warning("recording %s failed: %s: %s", example.id, type(exc).__name__, exc)
                reads = [inputs for predictor, inputs, _ in dspy.settings.trace if predictor is reader]
            record = {"id": example.id, "answers": list(example.answers), "reader": name,
                      "inputs": _plain(reads[-1]) if reads else None}
            done[example.id] = record
            if sink is not None:
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                sink.flush()
            bar.update()
    finally:
        bar.close()
        if sink is not None:
            sink.close()
    return [done[ex.id] for ex in trainset if ex.id in done]


def _plain(inputs: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(inputs, default=str))


class RecordedReader(Teleprompter):
    """Record the prepared program's reads once, then compile its reader on them (see module doc).

    Args:
        metric: `metric(example, prediction, trace=None)`, e.g. EM against `example.answers`.
        teleprompter: "random-search" (BootstrapFewShotWithRandomSearch: demos from reads the
            reader got right, `candidates` demo sets scored by EM) or "mipro" (MIPROv2:
            instructions and demos, `trials` trials).
        record_path: the JSONL of recorded reads (resumed); None keeps them in memory.
    """

    def __init__(self, metric, teleprompter: str = "random-search", record_path: str | Path | None = None,
                 max_demos: int = 2, candidates: int = 2, trials: int = 3, seed: int = 0, threads: int = 1,
                 prompt_model: dspy.LM | None = None):
        super().__init__()
        if teleprompter not in TELEPROMPTERS:
            raise ValueError(f"unknown reader teleprompter {teleprompter!r}; choose one of {', '.join(TELEPROMPTERS)}")
        self.metric, self.teleprompter = metric, teleprompter
        self.record_path = Path(record_path) if record_path is not None else None
        self.max_demos, self.candidates, self.trials, self.seed, self.threads = (max_demos, candidates, trials,
                                                                                 seed, threads)
        self.prompt_model = prompt_model

    def compile(self, student: dspy.Module, *, trainset: Sequence[dspy.Example], teacher=None, valset=None,
                **kwargs) -> dspy.Module:
        program = student.deepcopy()
        name, reader = reader_of(program)
        reads = record_reads(program, trainset, self.record_path)
        examples = [dspy.Example(**r["inputs"], answers=r["answers"]).with_inputs(*r["inputs"])
                    for r in reads if r.get("inputs")]
        if len(examples) < 2:
            raise ValueError(f"only {len(examples)} train questions reached the reader; a compile needs 2 or more")
        calls = PredictorCalls(self.record_path.with_name("reader-calls.jsonl") if self.record_path else None)
        pool = demo_pool(reader, examples, self.max_demos)
        if len(pool) < len(examples):
            log.info("%d of %d recorded reads are short enough to be demos in the model's window",
                     len(pool), len(examples))
        prepared_em, compiled_em, kept = keep_better(reader, examples, calls, self._score,
                                                     lambda module, ex: self._compile(module, ex, pool))
        program.reader_fit = {"reader": name, "teleprompter": self.teleprompter, "recorded": len(reads),
                              "examples": len(examples), "demo_pool": len(pool),
                              "prepared_em": round(prepared_em, 1),
                              "compiled_em": round(compiled_em, 1), "kept": kept, "demos": len(reader.demos)}
        return program

    def _score(self, module: OnePredictor, examples: list[dspy.Example]) -> float:
        """EM (0-100) of `module` on the recorded reads, one call an example."""
        return score(module, examples, self.metric, self.threads)

    def _compile(self, module: OnePredictor, examples: list[dspy.Example],
                 pool: list[dspy.Example]) -> OnePredictor:
        if self.teleprompter == "random-search":
            return random_search(module, examples, self.metric, self.max_demos, self.candidates, self.threads,
                                 pool=pool)
        teleprompter = MIPROv2(metric=self.metric, prompt_model=self.prompt_model, auto=None,
                               num_candidates=self.candidates,
                               max_bootstrapped_demos=self.max_demos if pool else 0,
                               max_labeled_demos=0, num_threads=self.threads, max_errors=10_000, seed=self.seed,
                               verbose=False)
        if len(pool) == len(examples):  # MIPROv2's own split: demos from the first fifth, scored on the rest
            return teleprompter.compile(module, trainset=examples, num_trials=self.trials, minibatch=False)
        return teleprompter.compile(module, trainset=pool or examples, valset=examples, num_trials=self.trials,
                                    minibatch=False)


def _recorded(teleprompter: str):
    def build(c):
        return RecordedReader(em_metric, teleprompter=teleprompter,
                              record_path=c.out_dir / "recorded-reads.jsonl" if c.out_dir is not None else None,
                              max_demos=c.spec.max_demos, candidates=c.tuning["candidates"], trials=c.tuning["trials"],
                              seed=c.spec.seed, threads=c.spec.threads, prompt_model=c.proposer), {}

    return build


def _recorded_bound(teleprompter: str):
    def bound(per_q: int, n: int, t: dict) -> int:  # one recorded run of the program, then one call an example
        scored = n * (t["candidates"] + 4) if teleprompter == "random-search" else n * t["candidates"] + t["trials"] * n
        return n * per_q + n + scored  # n: the prepared reader scored as a candidate

    return bound


def _has_reader(cls) -> bool:
    return bool(getattr(cls, "reader", None))


register(Compiler("reader", _recorded("random-search"), _recorded_bound("random-search"), fits=_has_reader,
                  unfit="declares no reader"))
register(Compiler("reader-mipro", _recorded("mipro"), _recorded_bound("mipro"), fits=_has_reader,
                  unfit="declares no reader"))
