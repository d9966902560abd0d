"""The two calls of a hop in DSPy's multi-hop pattern: a search query written from the question
and the notes so far, then notes taken from what that query found. Notes are kept short so
that several hops of them fit the window next to the passages."""

from __future__ import annotations

from typing import ClassVar

import dspy

MAX_QUERY_CHARS = 300  # a search query, not a paragraph: a runaway reply is cut here


class NextSearchQuery(dspy.Signature):
    """Write a search query for the next piece of information needed to answer the question.

    The notes hold what earlier searches found. Ask for what they are still missing, naming the
    person, place or work to look up; do not search again for something the notes already cover."""

    max_tokens: ClassVar[int] = 48  # one short query

    question: str = dspy.InputField()
    notes: list[str] = dspy.InputField(desc="facts found so far; empty before the first search")
    query: str = dspy.OutputField(desc="a short search query")


class TakeNotes(dspy.Signature):
    """Read the passages and write down the facts in them that help answer the question and are
    not already in the notes.

    Each note is one short sentence that makes sense on its own and keeps names, dates and
    numbers exactly as the passages give them. Give an empty list when the passages add nothing."""

    max_tokens: ClassVar[int] = 160  # a few short sentences

    question: str = dspy.InputField()
    notes: list[str] = dspy.InputField(desc="facts already noted")
    passages: list[str] = dspy.InputField(desc="documents just found, each as 'Title: text'")
    new_notes: list[str] = dspy.OutputField(desc="new facts, one short sentence each, at most three")


def clean_query(text: str | None) -> str:
    """A query as the retriever gets it: the first non-blank line, on one line, without the
    quotes or a "Query:" label a model may wrap it in, at most MAX_QUERY_CHARS; "" for a blank reply."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    query = " ".join(lines[0].split())
    if query.lower().startswith("query:"):
        query = query[len("query:"):].strip()
    return query.strip("\"'`").strip()[:MAX_QUERY_CHARS].strip()
