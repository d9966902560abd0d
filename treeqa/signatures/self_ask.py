"""Self-Ask's own step: decide whether one more follow-up question is needed and write it. The
follow-up is then searched and answered (`AnswerFromPassages`), and the final answer is read from
the follow-ups and their answers (`Answer`), so only this step needs a signature of its own."""

from __future__ import annotations

import re
from typing import ClassVar

import dspy

MAX_FOLLOW_UP_CHARS = 300  # one question, and a search query: a runaway reply is cut here

_LABEL = re.compile(r"^(?:follow[- ]?up(?:\s+question)?|question)\s*\d*\s*[:.-]\s*", re.IGNORECASE)


class FollowUp(dspy.Signature):
    """Decide whether the question still needs a simpler question answered before it can be
    answered, and if so, write that question.

    The history holds the follow-up questions already asked, each with the answer found for it.
    When it already settles the question, say no follow-up is needed. Otherwise ask about one
    missing fact only: a short question about one person, place, work or date, using the names
    the history gives (not "the director" but the director's name). Never ask again a question
    already in the history."""

    max_tokens: ClassVar[int] = 64  # the yes/no decision and one short question

    question: str = dspy.InputField(desc="the original question")
    history: str = dspy.InputField(desc="follow-up questions asked so far, each with the answer found for it")
    follow_up_needed: bool = dspy.OutputField(desc="True if another follow-up question is needed, False if not")
    follow_up: str = dspy.OutputField(desc="the next follow-up question; leave empty when none is needed")


def clean_follow_up(text: str | None) -> str:
    """A follow-up as it is searched and shown: its first non-blank line, on one line, without a
    "Follow up:" label or the quotes a model may add, at most MAX_FOLLOW_UP_CHARS; "" when blank."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    follow_up = _LABEL.sub("", " ".join(lines[0].split()))
    return follow_up.strip("\"'`").strip()[:MAX_FOLLOW_UP_CHARS].strip()
