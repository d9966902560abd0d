"""Small pieces every program shares: input checks, the retriever reference, the passage log."""

from __future__ import annotations

import re
from collections.abc import Iterable

from treeqa.data.corpus import Passage
from treeqa.retrievers.base import Retriever

MAX_QUESTION_CHARS = 2000  # a question, not a document: longer input would crowd the prompts out


def check_question(question: object, program: str) -> str:
    """The question stripped; a blank, over-long or undecodable question is a caller error,
    not an LM failure."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{program}: the question is empty")
    question = question.strip()
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"{program}: the question is {len(question):,} characters; at most {MAX_QUESTION_CHARS:,}")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: bytes from the shell that were not UTF-8
        raise ValueError(f"{program}: the question is not valid UTF-8 text (at character {exc.start})") from None
    return question


def check_retriever(retriever: Retriever | None, program: str, needed: bool) -> None:
    """Fail at construction, not at the first question, when a retrieving program has no retriever."""
    if needed and retriever is None:
        raise ValueError(f"{program} retrieves passages and needs a retriever (got None)")
    if retriever is not None and not callable(getattr(retriever, "search", None)):
        raise ValueError(f"{program}: the retriever must have a search(query, k) method")


class SharedRef:
    """Holds an object that every copy of a program shares.

    Optimizers deep-copy programs for each candidate; a retriever (faiss index, encoder) is
    not a parameter, so copies must point at the same one instead of duplicating it."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


class PassageLog:
    """Every passage a program saw, first-retrieved first, each id once (for recall@k)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Passage] = {}

    def add(self, passages: Iterable[Passage]) -> None:
        for p in passages:
            self._by_id.setdefault(p.id, p)

    @property
    def passages(self) -> list[Passage]:
        return list(self._by_id.values())


_NON_WORD = re.compile(r"[\W_]+")


def question_key(text: str) -> str:
    """Compare questions ignoring case, punctuation and spacing."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def same_question(a: str, b: str, overlap: float = 0.8) -> bool:
    """Whether two questions ask the same thing: equal up to case and punctuation, or sharing
    at least `overlap` of their words (Jaccard), which catches a small model's light rewording
    of a question it was told not to repeat."""
    words_a, words_b = set(question_key(a).split()), set(question_key(b).split())
    if not words_a or not words_b:
        return words_a == words_b
    return len(words_a & words_b) / len(words_a | words_b) >= overlap
