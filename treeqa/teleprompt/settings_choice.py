"""Compiling a program's settings: a small seeded search on train, judged by exact match.

Which settings suit a model is an empirical question (a 1.5B model may need `hops=2` where
the paper's models did not; a beam's threshold depends on how the model writes its
confidence). Each program declares a small space of settings worth trying
(`QAProgram.settings_space`); `SettingsSearch` tries the program's own settings and
`candidates` seeded draws from that space on the train questions, each with the annotated
demos when the train split has annotations (those cost no LM call), and keeps the best by
EM (ties keep the earlier: the program's own settings first). The chosen settings are saved
in `compiled.json` like any other and rebuilt by `load_program`.

With `max_cost_ratio` the search is for EM within a price: each candidate's seconds a question
are measured on the train questions beside rta's, in the same run on the same machine (the only
ratio that means anything: machines differ threefold), and only candidates at most that many
times rta's seconds may be kept; where none is, the cheapest is, and the record says so.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Sequence
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from treeqa.programs import build_program, program_name
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot, usable
from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.metrics import em_metric

log = logging.getLogger(__name__)
BASELINE = RetrieveThenAnswer.name  # what a candidate's seconds are measured against



def candidate_settings(space: dict[str, Sequence[Any]], own: dict[str, Any], candidates: int,
                       seed: int = 0) -> list[dict[str, Any]]:
    """The program's own settings, then up to `candidates` other distinct draws from `space`."""
    grid = [dict(zip(space, values, strict=True)) for values in itertools.product(*space.values())]
    others = [{**own, **choice} for choice in grid]
    others = [s for i, s in enumerate(others) if s != own and s not in others[:i]]
    random.Random(seed).shuffle(others)
    return [dict(own)] + others[:candidates]


class SettingsSearch(Teleprompter):
    """Try settings from the program's declared space on train; keep the best by the metric.

    Args:
        metric: (example, prediction) -> score, as DSPy's teleprompters take.
        candidates: settings tried besides the program's own.
        seed: which candidates are drawn (and the annotated demos' seed).
        demos: annotated demos per predictor given to every candidate (0: none).
        threads: evaluation threads.
        max_cost_ratio: keep only candidates whose seconds a question are at most this many times
            rta's on the same train questions (None: EM alone decides).
        scorer: (program, trainset) -> (score, seconds a question); by default dspy.Evaluate timed
            with the wall clock (tests pass their own).
    """

    def __init__(self, metric, candidates: int = 2, seed: int = 0, demos: int = 3, threads: int = 1,
                 max_cost_ratio: float | None = None, scorer=None):
        if candidates < 1:
            raise ValueError(f"candidates must be at least 1, got {candidates}")
        if max_cost_ratio is not None and max_cost_ratio <= 0:
            raise ValueError(f"max_cost_ratio must be above 0, got {max_cost_ratio}")
        self.metric, self.candidates, self.seed, self.demos, self.threads = metric, candidates, seed, demos, threads
        self.max_cost_ratio, self.scorer = max_cost_ratio, scorer or self._evaluate

    def _evaluate(self, program: dspy.Module, trainset: Sequence[dspy.Example]) -> tuple[float, float]:
        started = time.perf_counter()
        result = dspy.Evaluate(devset=list(trainset), metric=self.metric, num_threads=self.threads,
                               display_progress=True, max_errors=len(trainset) + 1)(program)
        return float(result.score), (time.perf_counter() - started) / max(1, len(trainset))

    def compile(self, student: dspy.Module, *, trainset: Sequence[dspy.Example], teacher=None,
                valset=None, **kwargs) -> dspy.Module:
        name = program_name(student)
        space = type(student).settings_space()
        if not space:
            raise ValueError(f"{name} declares no settings to search (settings_space is empty)")
        own = student.method_settings
        annotate = self.demos > 0 and any(usable(ex) for ex in trainset)
        retriever = getattr(student, "retriever", None)
        embed_fn = getattr(student, "embed_fn", None)
        budget = self._budget(retriever, trainset) if self.max_cost_ratio is not None else None
        tried, built = [], []
        for settings in candidate_settings(space, own, self.candidates, self.seed):
            try:
                program = build_program(name, retriever, **settings,
                                        **({"embed_fn": embed_fn} if embed_fn is not None else {}))
            except ValueError as exc:  # a combination the program refuses (e.g. hops beyond its depth)
                tried.append({"settings": _changed(settings, own), "error": str(exc)})
                continue
            if getattr(student, "threads", None) is not None:
                program.threads = student.threads
            if annotate:
                program = AnnotatedFewShot(k=self.demos, seed=self.seed).compile(program, trainset=trainset)
            score, seconds = self.scorer(program, trainset)
            tried.append({"settings": _changed(settings, own), "score": round(score, 2),
                          "seconds_per_q": round(seconds, 2)})
            built.append((program, score, seconds))
        if not built:
            raise ValueError(f"no candidate settings could be built: {tried}")
        best, best_score, within = _choose(built, budget["max_seconds_per_q"] if budget else None)
        best._compiled = True
        best.settings_search = {"tried": tried, "chosen": _changed(best.method_settings, own),
                                "train_score": round(best_score, 2), "annotated_demos": annotate}
        if budget is not None:
            best.settings_search["budget"] = {**budget, "within": within}
            if not within:
                log.warning("no settings ran within %.1f x %s's seconds a question; kept the cheapest",
                            self.max_cost_ratio, BASELINE)
        return best

    def _budget(self, retriever, trainset: Sequence[dspy.Example]) -> dict[str, Any]:
        """rta's seconds a question on these train questions, in this run: the price's unit."""
        _, seconds = self.scorer(build_program(BASELINE, retriever), trainset)
        return {"baseline": BASELINE, "baseline_seconds_per_q": round(seconds, 2),
                "max_cost_ratio": self.max_cost_ratio, "max_seconds_per_q": round(self.max_cost_ratio * seconds, 2)}


def _choose(built: list[tuple[dspy.Module, float, float]],
            max_seconds: float | None) -> tuple[dspy.Module, float, bool]:
    """The best score among candidates within `max_seconds` a question (ties keep the earlier);
    with none within it, the cheapest. Returns (program, score, whether it is within)."""
    within = [b for b in built if max_seconds is None or b[2] <= max_seconds]
    if within:
        program, score, _ = max(within, key=lambda b: b[1])  # max keeps the first of equal scores
        return program, score, True
    program, score, _ = min(built, key=lambda b: b[2])
    return program, score, False


def _changed(settings: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """Only what differs from the program's own settings (empty: its own)."""
    return {k: v for k, v in settings.items() if own.get(k) != v}


register(Compiler("settings",
                  lambda c: (SettingsSearch(em_metric, candidates=c.tuning["candidates"], seed=c.spec.seed,
                                            demos=c.spec.annotated_demos, threads=c.spec.threads,
                                            max_cost_ratio=c.spec.max_cost_ratio), {}),
                  lambda per_q, n, t: n * (t["candidates"] + 1) * per_q + n * t["priced"], preparer=True,
                  fits=lambda cls: bool(cls.settings_space()), unfit="has no settings to search"))

