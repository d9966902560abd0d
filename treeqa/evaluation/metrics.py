"""Answer and retrieval metrics as the QA literature computes them.

EM and F1 use the SQuAD normalisation (lower-case, drop punctuation and the articles
a/an/the, collapse whitespace) and take the maximum over the gold answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from treeqa.data.answers import normalize_answer


def _as_list(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0.

    An empty prediction (a failed question, or an answer like "The") scores 0 even against
    a gold answer that normalises to nothing: such a gold answer is a data error, and the
    loaders drop it.
    """
    pred = normalize_answer(prediction)
    if not pred:
        return 0.0
    return float(any(pred == normalize_answer(g) for g in _as_list(golds)))


def _f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:  # nothing to overlap; an empty answer never scores
        return 0.0
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: str | Sequence[str]) -> float:
    """Token-level F1 against the best-matching gold answer."""
    golds = _as_list(golds)
    return max((_f1(prediction, g) for g in golds), default=0.0)


def recall_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of distinct gold paragraphs among the first k retrieved ones.

    Pass paragraph ids (`Passage.id`, `example.gold_ids`): several paragraphs can share a
    title, so titles would credit a distractor from the right article.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    wanted = set(gold)
    if not wanted:
        raise ValueError("recall@k needs at least one gold paragraph")
    return len(wanted & set(retrieved[:k])) / len(wanted)


def answer_in_text(text: str, golds: str | Sequence[str]) -> bool:
    """Whether a normalised gold answer stands in the normalised text as whole words: DPR's
    "has answer" test, how the open-domain papers (ALLIES' Table 3) count a retrieval as a hit
    where no gold passage is annotated."""
    haystack = f" {normalize_answer(text)} "
    return any((gold := normalize_answer(g)) and f" {gold} " in haystack for g in _as_list(golds))


def answer_hit_at_k(texts: Sequence[str], golds: str | Sequence[str], k: int) -> float:
    """1.0 when any of the first k passages holds a gold answer (see `answer_in_text`)."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    return float(any(answer_in_text(text, golds) for text in texts[:k]))
