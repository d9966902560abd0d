"""IRCoT's reasoning step: the next sentence of a chain of thought over the passages found so
far. The sentence is both a step towards the answer and the next search query, so only the
first sentence of a reply is kept, and a sentence that states the answer ends the search."""

from __future__ import annotations

import re
from typing import ClassVar

import dspy

from treeqa.signatures.answer import clean_answer

NO_REASONING_YET = "(none yet)"
MAX_SENTENCE_CHARS = 400  # one sentence, and a search query: a runaway reply is cut here

_CONCLUSION = re.compile(r"\banswer\s+is\b\s*:?\s*(.*)", re.IGNORECASE | re.DOTALL)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_WORD_BEFORE = re.compile(r"(\S+)$")
_ABBREVIATIONS = {"Mrs", "Gen", "Gov", "Rev", "Sgt", "Col", "Capt", "Prof", "Sen", "Rep", "Inc", "Ltd", "Bros", "Vol"}


class NextReasoningStep(dspy.Signature):
    """You are working out the answer to a question that may need several facts joined together,
    one sentence at a time. Read the passages and the reasoning written so far, then write only
    the next sentence: one new fact from the passages (or from what you know) that moves the
    reasoning forward, naming the people, places or works it links. Do not repeat a sentence
    already written. When the reasoning so far and the passages settle the answer, write instead
    a sentence of the form "So the answer is: <short answer>." and nothing more."""

    max_tokens: ClassVar[int] = 96  # one sentence

    question: str = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="documents found so far, each as 'Title: text'")
    reasoning_so_far: str = dspy.InputField(desc="the sentences written so far, in order")
    next_sentence: str = dspy.OutputField(desc="exactly one sentence")


def first_sentence(text: str | None) -> str:
    """The first sentence of a reply, on one line and at most MAX_SENTENCE_CHARS long; "" for a
    blank reply. A full stop after a capitalised abbreviation ("Dr.", "St.", "J.", "U.S.", "Mrs.") is
    not taken for a sentence end, so a name is not cut in two."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = " ".join(lines[0].split())
    for match in _SENTENCE_END.finditer(line):
        before = _WORD_BEFORE.search(line[:match.start()])
        word = before.group(1) if before else ""
        if match.group(0)[0] == "." and word[:1].isupper() and (len(word) <= 2 or "." in word
                                                                 or word in _ABBREVIATIONS):
            continue
        line = line[:match.start() + 1]
        break
    return line[:MAX_SENTENCE_CHARS].strip()


def concluded_answer(sentence: str) -> str | None:
    """The answer a sentence concludes with ("... so the answer is: X."), or None when it states
    no answer (the reasoning goes on). "" when it says "the answer is" with nothing after it."""
    match = _CONCLUSION.search(sentence)
    return None if match is None else clean_answer(match.group(1))
