"""Evidence for a search step: facts extracted from retrieved passages, or a generated
background document (GENREAD) when no retrieval is used."""

from __future__ import annotations

import dspy


class SummarizeEvidence(dspy.Signature):
    """Extract from the passages the facts that help answer the question.

    Write them as a few short factual sentences using only what the passages say. If the
    passages contain nothing relevant, write 'No relevant information.'"""

    question: str = dspy.InputField(desc="the question the facts should help answer")
    passages: list[str] = dspy.InputField(desc="retrieved documents, each as 'Title: text'")
    evidence: str = dspy.OutputField(desc="the relevant facts, at most three sentences")


class GenerateBackground(dspy.Signature):
    """Write a short encyclopedia-style background paragraph that contains the facts needed
    to answer the question. Keep it factual and under 100 words."""

    question: str = dspy.InputField()
    document: str = dspy.OutputField(desc="a short background paragraph")
