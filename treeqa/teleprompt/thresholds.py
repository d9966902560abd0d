"""Cuts on a score fitted on labelled examples (a relevance threshold, a judge's two cuts);
scikit-learn's ROC curve underneath."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def recall_threshold(scores: Sequence[float], labels: Sequence[bool], min_recall: float) -> float:
    """The highest cut `score >= threshold` that still keeps `min_recall` of the true examples:
    for a decision whose false negatives cost more than its false positives (rejecting a gold
    paragraph loses its whole subtree; keeping a distractor costs a few calls)."""
    if not 0.0 < min_recall <= 1.0:
        raise ValueError(f"min_recall must be in (0, 1], got {min_recall}")
    positives = sorted((s for s, y in zip(scores, labels, strict=True) if y), reverse=True)
    if not positives:
        raise ValueError("fitting a threshold needs true examples")
    kept = math.ceil(min_recall * len(positives) - 1e-9)  # how many positives must pass
    return float(positives[kept - 1])


def fit_threshold(scores: Sequence[float], labels: Sequence[bool]) -> tuple[float, float]:
    """(threshold, balanced accuracy): the cut `score >= threshold` that best separates the
    labels, weighting both classes equally (relevant paragraphs are the rarer ones); the
    midpoint between neighbouring scores, so it does not sit on a training score."""
    from sklearn.metrics import roc_curve  # heavy (~1 s): loaded when a judge is fitted, not by every command

    labels = [bool(y) for y in labels]
    if len(labels) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    if all(labels) or not any(labels):
        raise ValueError("fitting a threshold needs both true and false examples")
    fpr, tpr, cuts = roc_curve(labels, scores, drop_intermediate=False)  # cuts: distinct scores, highest first
    balanced = np.round(0.5 * (tpr + 1 - fpr), 12)  # equal shares compare equal, whatever the float path
    best = int(np.argmax(balanced[1:])) + 1  # the first (highest) of the best cuts; [0] accepts nothing
    if balanced[best] <= 0.5:
        return round(1.0 + 1e-9, 6), 0.5  # nothing separates them: accept nothing
    below = float(cuts[best + 1]) if best + 1 < len(cuts) else 0.0
    return round((float(cuts[best]) + below) / 2, 6), round(float(balanced[best]), 4)
