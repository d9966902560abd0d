"""The metrics the teleprompters optimise: exact match of the answer, and EM with feedback."""

from __future__ import annotations

from typing import Any

import dspy

from treeqa.evaluation.metrics import exact_match


def em_metric(example: dspy.Example, prediction: Any, trace: Any = None) -> float | bool:
    """Exact match of the answer; while bootstrapping (trace given) only a full match passes."""
    score = exact_match(str(getattr(prediction, "answer", "") or ""), example.answers)
    return score >= 1.0 if trace is not None else score


def em_feedback_metric(gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                       pred_trace: Any = None) -> dspy.Prediction:
    """EM with a sentence of feedback, as GEPA's reflection needs."""
    answer = str(getattr(pred, "answer", "") or "")
    score = exact_match(answer, gold.answers)
    if score:
        feedback = f"Correct: {answer!r} matches the gold answer."
    else:
        feedback = (f"Wrong: the program answered {answer!r} but the gold answer is "
                    f"{' / '.join(map(repr, gold.answers[:3]))}. Answers must be one short entity, "
                    "exactly as a reference would write it, or yes/no for yes/no questions.")
    return dspy.Prediction(score=score, feedback=feedback)
