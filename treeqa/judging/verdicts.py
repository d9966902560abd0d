"""The model's own probability of a true/false verdict, read from its token log-probabilities.

A 1.5B model's written verdict is biased one way or the other (ToR's review accepts or rejects
nearly everything), but the probability it puts on `true` at the verdict's token still ranks
paragraphs. It is read from the token log-probabilities of the reply: the embedded engine
gives them when asked, and so do OpenAI-compatible servers (vLLM, llama.cpp's server, OpenAI)
with `logprobs`. A program asks with `LOGPROBS` as the predictor's config.

    pred = review(question=q, paragraphs=texts, config=LOGPROBS)
    verdict_probability(pred, "relevant")   # P(true) among the true/false spellings, or None

Works for both reply formats treeqa uses: JSON (`"relevant": true`) and DSPy's chat format
(`[[ ## relevant ## ]]` then `True`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

LOGPROBS = {"logprobs": True, "top_logprobs": 10}
_TRUE, _FALSE = "true", "false"


def _get(entry, key, default=None):
    if isinstance(entry, Mapping):
        return entry.get(key, default)
    return getattr(entry, key, default)


def _spelling(token: str) -> str:
    return token.strip().strip("\"'").lower()


def verdict_probability(prediction, field: str, spellings: tuple[str, str] = (_TRUE, _FALSE)) -> float | None:
    """P(`field` is true) from the prediction's token log-probabilities.

    The value token is the first true/false token after the field's name in the reply; the
    probability is the mass of its true spellings (True, " true", ...) over true and false
    ones among the token's alternatives. None when the reply carries no log-probabilities or
    the field's value token cannot be found (the caller counts that; it never guesses).
    `spellings` names the two values (e.g. ("yes", "no") for a yes/no answer), the first's
    probability returned.
    """
    content = _get(_get(prediction, "logprobs"), "content")
    if not content:
        return None
    markers = (f'"{field}"', f"[[ ## {field} ## ]]")
    text = ""
    for step in content:
        token = str(_get(step, "token", ""))
        start = max(text.rfind(m) + len(m) if text.rfind(m) >= 0 else -1 for m in markers)
        if start >= 0 and not text[start:].strip(" \t\n:\"'") and _spelling(token) in spellings:
            return _true_share(step, spellings)
        text += token
    return None


def _true_share(step, spellings: tuple[str, str]) -> float | None:
    mass = dict.fromkeys(spellings, 0.0)
    seen = set()
    options = [*(_get(step, "top_logprobs") or []), step]  # the chosen token counts once, if not listed
    for option in options:
        token = str(_get(option, "token", ""))
        if token in seen:
            continue
        seen.add(token)
        spelling = _spelling(token)
        if spelling in mass:
            mass[spelling] += math.exp(float(_get(option, "logprob", -math.inf)))
    total = sum(mass.values())
    return mass[spellings[0]] / total if total > 0 else None
