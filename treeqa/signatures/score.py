"""Score: how likely a candidate answer is correct, given the search history (ALLIES' Score)."""

from __future__ import annotations

import math
import re
from typing import ClassVar

import dspy
from pydantic_core import core_schema

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(\s*%)?")


def parse_confidence(value: object) -> float:
    """A confidence in [0, 1] from what a small model writes.

    Accepts a number, "0.8.", "Confidence: 0.8", "80%"; the first number in the text counts,
    a percentage is divided by 100, and anything outside [0, 1] is clamped. Text without a
    number raises ValueError, so DSPy reports a parse failure instead of a made-up score."""
    if isinstance(value, bool):
        raise ValueError("a confidence must be a number, not a boolean")
    if isinstance(value, (int, float)):
        number, percent = float(value), False
    elif isinstance(value, str):
        match = _NUMBER.search(value)
        if match is None:
            raise ValueError(f"no number in the confidence {value[:80]!r}")
        number, percent = float(match.group(0).rstrip("% \t")), bool(match.group(1))
    elif isinstance(value, (list, tuple)) and len(value) == 1:
        return parse_confidence(value[0])
    else:
        raise ValueError(f"a confidence must be a number, got {type(value).__name__}")
    if math.isnan(number):
        raise ValueError("a confidence must be a number, got NaN")
    if percent:
        number /= 100.0
    return min(1.0, max(0.0, number))


class Confidence(float):
    """The type of Score's output: a float that pydantic, and so DSPy's adapters, read with
    `parse_confidence` (a plain `float` field rejects "0.8." and never clamps)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return core_schema.no_info_before_validator_function(parse_confidence, core_schema.float_schema())


Confidence.__name__ = "float"  # the prompt names the type; keep it reading as a plain float


class Score(dspy.Signature):
    """Decide whether the candidate answer is correct, checking it against the evidence in
    the history and what you know. Output 0.9 or more when you are sure it is correct, about
    0.6 when it is plausible but unconfirmed, about 0.3 when it is probably wrong, and 0.1 or
    less when it is wrong or does not answer the question."""

    max_tokens: ClassVar[int] = 24  # one number

    question: str = dspy.InputField(desc="the original question")
    history: str = dspy.InputField(desc="questions already searched and the evidence found for each")
    answer: str = dspy.InputField(desc="the candidate answer to judge")
    confidence: Confidence = dspy.OutputField(desc="a probability between 0 and 1, e.g. 0.6")
