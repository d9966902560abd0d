"""A corpus paragraph and its identity, shared by the corpora and the gold annotations.

Gold paragraphs are matched by the same id the corpus gives them (a hash of title and
text), so recall counts paragraphs, not titles: MuSiQue has many paragraphs per title.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Passage:
    """A paragraph of the corpus; `score` is filled in by a retriever."""

    id: str
    title: str
    text: str
    score: float = 0.0

    def as_text(self, max_chars: int | None = None) -> str:
        """The one way a passage is written for a model or an encoder: "Title: text", the text
        cut at a word boundary to `max_chars` (marked with " …") when it is longer."""
        text = self.text
        if max_chars is not None and len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0] + " …"
        return f"{self.title}: {text}"

    def __str__(self) -> str:
        return self.as_text()


def passage_id(title: str, text: str) -> str:
    """Stable across runs and independent of pooling order: a hash of title and text."""
    return hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


def clean_whitespace(text: str) -> str:
    """Paragraph text as the corpus stores it: runs of whitespace collapsed."""
    return " ".join(text.split())


_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """A paragraph's sentences, split after a full stop, question or exclamation mark that a
    capital or a digit follows. Rough on abbreviations ("J. Smith" splits): the reader set only
    needs sentence-sized pieces of a paragraph, not a linguist's sentences."""
    return [s.strip() for s in _SENTENCE_BREAK.split(clean_whitespace(text)) if s.strip()]
