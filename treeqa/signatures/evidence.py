"""Evidence for a search step: facts extracted from retrieved passages, or a generated
background document (GENREAD) when no retrieval is used."""

from __future__ import annotations

from typing import ClassVar

import dspy


class SummarizeEvidence(dspy.Signature):
    """Extract from the passages the facts that come closest to answering the question.

    Write them as a few short factual sentences, using only what the passages say and
    keeping every name, date and number they give."""

    max_tokens: ClassVar[int] = 160  # the few relevant facts, in a sentence or three

    question: str = dspy.InputField(desc="the question the facts should help answer")
    passages: list[str] = dspy.InputField(desc="retrieved documents, each as 'Title: text'")
    evidence: str = dspy.OutputField(desc="the relevant facts, at most three sentences")


class GenerateBackground(dspy.Signature):
    """Write a short encyclopedia-style background paragraph that contains the facts needed
    to answer the question. Keep it factual and under 100 words."""

    max_tokens: ClassVar[int] = 256  # a short background paragraph (GENREAD)

    question: str = dspy.InputField()
    document: str = dspy.OutputField(desc="a short background paragraph")
