"""Answer the original question, from a search history or from passages, with one short entity.

`clean_answer` is the one answer policy: every program passes its final answer through it,
so differences in EM come from the methods, not from their post-processing.
"""

from __future__ import annotations

import re
from typing import ClassVar

import dspy


class Answer(dspy.Signature):
    """Answer the original question using the search history and what you know.

    Reply with the answer only: one short entity such as a name, a place, a date or a number,
    or yes/no for a yes/no question. No sentence, no explanation. If the history does not
    give the answer, give your best guess."""

    max_tokens: ClassVar[int] = 48  # one short entity

    question: str = dspy.InputField(desc="the original question")
    history: str = dspy.InputField(desc="questions already searched and the evidence found for each")
    answer: str = dspy.OutputField(desc="one short entity, a few words at most")


class AnswerFromPassages(dspy.Signature):
    """Answer the question using the passages and what you know.

    Reply with the answer only: one short entity such as a name, a place, a date or a number,
    or yes/no for a yes/no question. No sentence, no explanation. If the passages do not give
    the answer, give your best guess."""

    max_tokens: ClassVar[int] = 48  # one short entity

    question: str = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="documents that may contain the answer")
    answer: str = dspy.OutputField(desc="one short entity, a few words at most")


class ReasonFromPassages(dspy.Signature):
    """Answer the question using the passages and what you know, after a short reasoning.

    First reason in two or three sentences: which passage says what, and how that leads to the
    answer. Then reply with the answer only: one short entity such as a name, a place, a date or
    a number, or yes/no for a yes/no question. If the passages do not give the answer, give your
    best guess."""

    max_tokens: ClassVar[int] = 448  # a few sentences, then one short entity (320 cut some off)

    question: str = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="documents that may contain the answer")
    reasoning: str = dspy.OutputField(desc="two or three sentences from the passages to the answer")
    answer: str = dspy.OutputField(desc="one short entity, a few words at most")


class ReasonTowardsAnswer(dspy.Signature):
    """You are told the answer to the question. Using the passages, write the two or three
    sentences of reasoning that lead from them to that answer, as if you had found it yourself,
    and name the answer in the last sentence. Never say that it was given to you or that it is
    the correct one. Then repeat the answer."""

    max_tokens: ClassVar[int] = 448

    question: str = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="documents that may contain the answer")
    correct_answer: str = dspy.InputField(desc="the answer your reasoning must reach")
    reasoning: str = dspy.OutputField(desc="two or three sentences from the passages to the answer")
    answer: str = dspy.OutputField(desc="the correct answer, repeated")


_ANSWER_PREFIX = re.compile(r"^(?:so,?\s+)?(?:the\s+)?(?:final\s+)?answer(?:\s+is\b|\s*:)\s*", re.IGNORECASE)


# control characters, and the invisible and direction-changing marks a terminal or page would obey
UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
MAX_ANSWER_CHARS = 300  # an entity, not a document: a runaway reply is cut here


def clean_answer(text: str | None) -> str:
    """The bare answer: first line, without an 'The answer is' lead-in or a closing full stop,
    control characters or direction marks, at most MAX_ANSWER_CHARS long."""
    lines = [line for line in UNPRINTABLE.sub("", str(text or "")).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    answer = _ANSWER_PREFIX.sub("", lines[0].strip()).strip()[:MAX_ANSWER_CHARS].strip()
    return answer[:-1].strip() if answer.endswith(".") and not answer.endswith("..") else answer
