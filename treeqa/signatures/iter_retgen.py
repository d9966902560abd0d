"""ITER-RETGEN's generation: a short chain of reasoning and an answer from one round's passages.
The whole generation (reasoning and answer) is what the next round searches with, next to the
question, so it is kept to a few sentences."""

from __future__ import annotations

from typing import ClassVar

import dspy

from treeqa.signatures.budget import REASONING_TOKENS

MAX_GENERATION_CHARS = 1000  # what of a generation goes into the next query: a runaway reply is cut here


class ReasonThenAnswer(dspy.Signature):
    """Answer the question from the passages, reasoning briefly first.

    In the reasoning, state in two or three sentences the facts from the passages that lead to
    the answer, naming the people, places or works they link; if a fact is missing, say which.
    The answer is one short entity such as a name, a place, a date or a number, or yes/no for a
    yes/no question, with no sentence around it. If the passages do not settle it, give your
    best guess."""

    max_tokens: ClassVar[int] = 48 + REASONING_TOKENS  # a few sentences of reasoning, then one short entity

    question: str = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="documents that may contain the answer, each as 'Title: text'")
    reasoning: str = dspy.OutputField(desc="two or three sentences: the facts that lead to the answer")
    answer: str = dspy.OutputField(desc="one short entity, a few words at most")


def generation_text(reasoning: str | None, answer: str | None) -> str:
    """A round's generation as the next round searches with it: the reasoning then the answer, on
    one line, at most MAX_GENERATION_CHARS; "" when the model wrote nothing."""
    text = " ".join(" ".join(str(part or "").split()) for part in (reasoning, answer)).strip()
    return text[:MAX_GENERATION_CHARS].strip()


def round_query(question: str, generation: str) -> str:
    """The query of a round after the first: the question, then the previous round's generation
    (question first, so an encoder that cuts long input keeps the question)."""
    return f"{question} {generation}".strip() if generation else question
