"""Compiling a program's settings: a small seeded search on train, judged by exact match.

Which settings suit a model is an empirical question (a 1.5B model may need `hops=2` where
the paper's models did not; a beam's threshold depends on how the model writes its
confidence). Each program declares a small space of settings worth trying
(`QAProgram.settings_space`); `SettingsSearch` tries the program's own settings and
`candidates` seeded draws from that space on the train questions, each with the annotated
demos when the train split has annotations (those cost no LM call), and keeps the best by
EM (ties keep the earlier: the program's own settings first). The chosen settings are saved
in `compiled.json` like any other and rebuilt by `load_program`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from treeqa.programs import build_program, program_name
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot, usable
from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.metrics import em_metric


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
    """

    def __init__(self, metric, candidates: int = 2, seed: int = 0, demos: int = 3, threads: int = 1):
        if candidates < 1:
            raise ValueError(f"candidates must be at least 1, got {candidates}")
        self.metric, self.candidates, self.seed, self.demos, self.threads = metric, candidates, seed, demos, threads

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
        tried, best, best_score = [], None, -1.0
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
            result = dspy.Evaluate(devset=list(trainset), metric=self.metric, num_threads=self.threads,
                                   display_progress=True, max_errors=len(trainset) + 1)(program)
            score = float(result.score)
            tried.append({"settings": _changed(settings, own), "score": round(score, 2)})
            if score > best_score:
                best, best_score = program, score
        if best is None:
            raise ValueError(f"no candidate settings could be built: {tried}")
        best._compiled = True
        best.settings_search = {"tried": tried, "chosen": _changed(best.method_settings, own),
                                "train_score": round(best_score, 2), "annotated_demos": annotate}
        return best


def _changed(settings: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """Only what differs from the program's own settings (empty: its own)."""
    return {k: v for k, v in settings.items() if own.get(k) != v}


register(Compiler("settings",
                  lambda c: (SettingsSearch(em_metric, candidates=c.tuning["candidates"], seed=c.spec.seed,
                                            demos=c.spec.annotated_demos, threads=c.spec.threads), {}),
                  lambda per_q, n, t: n * (t["candidates"] + 1) * per_q, preparer=True,
                  fits=lambda cls: bool(cls.settings_space()), unfit="has no settings to search"))

