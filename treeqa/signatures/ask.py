"""Ask: which further questions would help answer the original one (ALLIES' Ask function)."""

from __future__ import annotations

import re
from typing import ClassVar

import dspy
from pydantic_core import core_schema

_NUMBERING = re.compile(r"^\s*(?:[-*•]|\(?\d+[.)]|\[\d+\]|Q\d+[:.])\s*", re.IGNORECASE)


def parse_questions(value: object) -> list[str]:
    """A list of questions from what a small model writes: a JSON list, or one question per
    line with or without numbering ("1. …", "- …"), possibly under a heading line."""
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    elif isinstance(value, str):
        items = value.splitlines()
    else:
        raise ValueError(f"expected a list of questions, got {type(value).__name__}")
    questions = []
    for item in items:
        text = _NUMBERING.sub("", item).strip().strip('"').strip()
        if not text or (text.endswith(":") and "?" not in text):  # blank or a heading such as "Questions:"
            continue
        questions.append(text)
    return questions


class SubQuestions(list):
    """The type of Ask's output: a list of strings that pydantic, and so DSPy's adapters, read
    with `parse_questions` (a plain `list[str]` field rejects a numbered list)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return core_schema.no_info_before_validator_function(
            parse_questions, core_schema.list_schema(core_schema.str_schema()))


SubQuestions.__name__ = "list[str]"  # the prompt names the type; keep it reading as a plain list[str]


class Ask(dspy.Signature):
    """Break the original question into simpler search questions whose answers are still missing.

    Each new question asks about one person, place, work or fact named in the question or the
    evidence, and must differ from the original question and from the questions already
    searched. Put the most useful first and write at most `max_questions`. When the question
    compares two things, ask one question about each of them."""

    max_tokens: ClassVar[int] = 128  # a few short questions as a JSON list

    question: str = dspy.InputField(desc="the original question")
    history: str = dspy.InputField(desc="questions already searched and the evidence found for each")
    max_questions: int = dspy.InputField(desc="the largest number of questions to write")
    sub_questions: SubQuestions = dspy.OutputField(desc="the new questions, most useful first")
