"""Predictors capped at their signature's own token budget.

Each signature declares `max_tokens` (a ClassVar next to its fields): what its outputs
need, JSON keys included, and no more. A call can then never run on past its answer, and
a remote endpoint is never asked for more than that.
"""

from __future__ import annotations

import dspy

REASONING_TOKENS = 256


def budget(signature: type[dspy.Signature]) -> int:
    value = getattr(signature, "max_tokens", None)
    if not isinstance(value, int) or value <= 0:
        raise TypeError(f"{signature.__name__} declares no max_tokens budget")
    return value


def predict(signature: type[dspy.Signature]) -> dspy.Predict:
    return dspy.Predict(signature, max_tokens=budget(signature))


def chain_of_thought(signature: type[dspy.Signature], reasoning_tokens: int = REASONING_TOKENS) -> dspy.ChainOfThought:
    return dspy.ChainOfThought(signature, max_tokens=budget(signature) + reasoning_tokens)
