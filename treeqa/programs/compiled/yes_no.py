"""A trained reader's yes or no, calibrated: where the reader answers "yes" or "no", the answer is
decided by its own probability of "yes" (read from the answer token's log-probabilities) shifted
by a bias fitted for the dataset on the reader's validation reads, so that its share of "yes"
follows the training questions' share (`treeqa.train.yes_no` fits it).

Why: the released reader, trained on reads balanced by question template, still said "no" to
9 of its 10 2Wiki validation reads (3 of them "yes") and to 7 of 8 yes/no 2Wiki claim questions
(all "yes"): what swings is its prior, per dataset, not only its reading. A bias is one number
a dataset, recorded in the compiled file (`yes_no`) beside the adapter; an answer that is not
yes or no, and a reply without log-probabilities, are left as the reader wrote them (the latter
counted on the prediction as `yes_no_calibration`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dspy

from treeqa.judging.verdicts import LOGPROBS, verdict_probability

YES_NO = ("yes", "no")
_CLIP = 1e-6  # a probability of exactly 0 or 1 still has a finite log-odds


def yes_probability(prediction) -> float | None:
    """The reader's P("yes") against "no" at its answer's first token, or None where the reply
    has no log-probabilities or its answer does not begin with yes or no."""
    return verdict_probability(prediction, "answer", YES_NO)


def log_odds(p: float) -> float:
    p = min(max(p, _CLIP), 1 - _CLIP)
    return math.log(p / (1 - p))


def calibrated(prediction, bias: float):
    """`prediction` with a written yes/no replaced by the biased comparison (see the module doc)."""
    said = str(getattr(prediction, "answer", "") or "").strip().strip(".!\"'").strip().lower()
    if said not in YES_NO:
        return prediction
    p = yes_probability(prediction)
    if p is None:
        prediction.yes_no_calibration = "no log-probabilities: the written answer kept"
        return prediction
    decided = "yes" if log_odds(p) + bias >= 0 else "no"
    prediction.yes_no_calibration = {"written": said, "p_yes": round(p, 4), "bias": bias, "answer": decided}
    prediction.answer = decided
    return prediction


class YesNoCalibratedPredict(dspy.Predict):
    """A reader predictor asked with log-probabilities whose yes/no is `calibrated` by its
    `yes_no_bias`. Swapped in as the predictor's class, so its signature, demos, LM and state
    stay as they are."""

    yes_no_bias: float = 0.0

    def forward(self, **kwargs):
        kwargs["config"] = {**LOGPROBS, **(kwargs.get("config") or {})}
        return calibrated(super().forward(**kwargs), self.yes_no_bias)

    async def aforward(self, **kwargs):
        kwargs["config"] = {**LOGPROBS, **(kwargs.get("config") or {})}
        return calibrated(await super().aforward(**kwargs), self.yes_no_bias)


def calibrate_yes_no(program: dspy.Module, predictors: Sequence[str], bias: float) -> None:
    """Give the named predictors a calibrated yes/no with `bias`. A predictor class may name its
    calibrated kind (`with_yes_no`): an endpoint's served reader keeps its trained prompt
    (`treeqa.programs.compiled.adapters`)."""
    found = dict(program.named_predictors())
    missing = sorted(set(predictors) - set(found))
    if missing:
        raise ValueError(f"no predictor named {', '.join(missing)} to calibrate (it has {', '.join(found)})")
    for name in predictors:
        predictor = found[name]
        if not isinstance(predictor, YesNoCalibratedPredict):
            predictor.__class__ = getattr(type(predictor), "with_yes_no", YesNoCalibratedPredict)
        predictor.yes_no_bias = float(bias)


def yes_no_record(program: dspy.Module) -> dict[str, Any] | None:
    """What a compiled file records of the calibration (`yes_no`), or None where there is none."""
    biased = {name: p.yes_no_bias for name, p in program.named_predictors() if isinstance(p, YesNoCalibratedPredict)}
    if not biased:
        return None
    if len(set(biased.values())) > 1:
        raise ValueError(f"one yes/no bias a program; its predictors hold {sorted(set(biased.values()))}")
    fit = getattr(program, "yes_no_fit", None) or {}
    return {"bias": next(iter(biased.values())), "predictors": sorted(biased), **fit}
