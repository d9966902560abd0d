"""How an answer is compared and how deep a retrieved list is judged: the definitions the data,
the programs and the metrics share (`treeqa.evaluation.metrics` computes EM, F1 and recall with them)."""

from __future__ import annotations

import re
import string
import unicodedata

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation; also drops Unicode punctuation (curly quotes, dashes)."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION and not unicodedata.category(ch).startswith("P"))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


RECALL_K = 15  # the ToR paper's recall@15 (after Trivedi et al., 2023)
