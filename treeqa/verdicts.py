"""The model's own probability of a true/false verdict, and thresholds fitted on it (the ROC
figures are scikit-learn's).

A 1.5B model's written verdict is biased one way or the other (ToR's review accepts or rejects
nearly everything), but the probability it puts on `true` at the verdict's token still ranks
paragraphs. It is read from the token log-probabilities of the reply: the embedded engine
gives them when asked, and so do OpenAI-compatible servers (vLLM, llama.cpp's server, OpenAI)
with `logprobs`. A program asks with `LOGPROBS` as the predictor's config.

    pred = review(question=q, paragraphs=texts, config=LOGPROBS)
    verdict_probability(pred, "relevant")   # P(true) among the true/false spellings, or None

Works for both reply formats treeqa uses: JSON (`"relevant": true`) and DSPy's chat format
(`[[ ## relevant ## ]]` then `True`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

LOGPROBS = {"logprobs": True, "top_logprobs": 10}
_TRUE, _FALSE = "true", "false"


def _get(entry, key, default=None):
    if isinstance(entry, Mapping):
        return entry.get(key, default)
    return getattr(entry, key, default)


def _spelling(token: str) -> str:
    return token.strip().strip("\"'").lower()


def verdict_probability(prediction, field: str) -> float | None:
    """P(`field` is true) from the prediction's token log-probabilities.

    The value token is the first true/false token after the field's name in the reply; the
    probability is the mass of its true spellings (True, " true", ...) over true and false
    ones among the token's alternatives. None when the reply carries no log-probabilities or
    the field's value token cannot be found (the caller counts that; it never guesses).
    """
    content = _get(_get(prediction, "logprobs"), "content")
    if not content:
        return None
    markers = (f'"{field}"', f"[[ ## {field} ## ]]")
    text = ""
    for step in content:
        token = str(_get(step, "token", ""))
        start = max(text.rfind(m) + len(m) if text.rfind(m) >= 0 else -1 for m in markers)
        if start >= 0 and not text[start:].strip(" \t\n:\"'") and _spelling(token) in (_TRUE, _FALSE):
            return _true_share(step)
        text += token
    return None


def _true_share(step) -> float | None:
    mass = {_TRUE: 0.0, _FALSE: 0.0}
    seen = set()
    options = [*(_get(step, "top_logprobs") or []), step]  # the chosen token counts once, if not listed
    for option in options:
        token = str(_get(option, "token", ""))
        if token in seen:
            continue
        seen.add(token)
        spelling = _spelling(token)
        if spelling in mass:
            mass[spelling] += math.exp(float(_get(option, "logprob", -math.inf)))
    total = mass[_TRUE] + mass[_FALSE]
    return mass[_TRUE] / total if total > 0 else None


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance a random positive scores above a random negative
    (ties count half). None without both classes."""
    from sklearn.metrics import roc_auc_score

    labels = [bool(y) for y in labels]
    if len(labels) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    if all(labels) or not any(labels):
        return None
    return float(roc_auc_score(labels, scores))


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
    from sklearn.metrics import roc_curve

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
