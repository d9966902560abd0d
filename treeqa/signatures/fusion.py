"""Evidence fusion (Tree of Reviews, Sec. 3.3): the final answer from the evidence pool.

A piece of evidence is an accepted reasoning path (its paragraphs) with the short
analysis written when it was accepted. Three readers: from the analyses only, from the
paragraphs only, or from both (evidence-based, the paper's default); and a fourth of ours,
`passages`: rta's own reader (`AnswerFromPassages`) on the search's first five distinct
paragraphs, so a LoRA adapter trained on rta's reads reads ToR's search in the exact prompt it
was trained on. The context builders here fit as much evidence as a character budget allows,
in pool order, dropping the pieces that come last rather than overflowing the model's window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import dspy

from treeqa.data.corpus import Passage
from treeqa.signatures.answer import AnswerFromPassages
from treeqa.signatures.formatting import format_passages

FUSIONS: tuple[str, ...] = ("analysis", "paragraph", "evidence", "passages")
PASSAGES_READ = 5  # rta's k: what a reader trained on rta's reads is shown

_ANSWER = "one short entity, a few words at most"


class AnswerFromAnalyses(dspy.Signature):
    """Answer the question from short analyses written while reading different documents.

    The analyses may disagree: weigh them, use what you know, and pick the best-supported
    answer. Give only the answer itself: one short entity such as a name, a place, a date,
    a number, or yes/no; not a sentence."""

    max_tokens: ClassVar[int] = 64  # one short answer

    question: str = dspy.InputField()
    analyses: list[str] = dspy.InputField(desc="short statements that each try to answer the question")
    answer: str = dspy.OutputField(desc=_ANSWER)


class AnswerFromParagraphs(dspy.Signature):
    """Answer the question from the paragraphs; use what you know if they fall short.

    Give only the answer itself: one short entity such as a name, a place, a date, a number,
    or yes/no; not a sentence."""

    max_tokens: ClassVar[int] = 64  # one short answer

    question: str = dspy.InputField()
    paragraphs: list[str] = dspy.InputField(desc="paragraphs found for the question, each as 'Title: text'")
    answer: str = dspy.OutputField(desc=_ANSWER)


class AnswerFromEvidence(dspy.Signature):
    """Answer the question from pieces of evidence. Each piece is an analysis (a tentative
    answer) followed by the paragraphs it was drawn from.

    The analyses may disagree: check them against their paragraphs, use what you know, and
    pick the best-supported answer. Give only the answer itself: one short entity such as a
    name, a place, a date, a number, or yes/no; not a sentence."""

    max_tokens: ClassVar[int] = 64  # one short answer

    question: str = dspy.InputField()
    evidence: list[str] = dspy.InputField(desc="pieces of evidence: an analysis and its supporting paragraphs")
    answer: str = dspy.OutputField(desc=_ANSWER)


FUSION_SIGNATURES: dict[str, type[dspy.Signature]] = {
    "analysis": AnswerFromAnalyses,
    "paragraph": AnswerFromParagraphs,
    "evidence": AnswerFromEvidence,
    "passages": AnswerFromPassages,
}
FUSION_INPUT: dict[str, str] = {"analysis": "analyses", "paragraph": "paragraphs", "evidence": "evidence",
                                "passages": "passages"}


@dataclass(frozen=True)
class Evidence:
    """One accepted reasoning path: its paragraphs, root side first, and its analysis."""

    passages: tuple[Passage, ...]
    analysis: str = ""


def _fit(items: Sequence[str], budget: int) -> list[str]:
    """Items in order while they fit `budget` characters; the first one is cut to fit if alone too long."""
    out, used = [], 0
    for item in items:
        if used + len(item) > budget:
            if not out:
                out.append(item[:budget].rsplit(" ", 1)[0] + " …")
            break
        out.append(item)
        used += len(item)
    return out


def format_evidence(evidence: Evidence, max_paragraph_chars: int | None = None) -> str:
    """"Analysis: ...\\nParagraphs:\\n- Title: text" for the evidence-based reader."""
    paragraphs = "\n".join(f"- {p}" for p in format_passages(evidence.passages, max_chars=max_paragraph_chars))
    return f"Analysis: {evidence.analysis or '(none)'}\nParagraphs:\n{paragraphs}"


def distinct_paragraphs(pool: Sequence[Evidence]) -> list[Passage]:
    """The pool's paragraphs in pool order, each once (a paragraph on two accepted paths is read once)."""
    seen: dict[str, Passage] = {}
    for e in pool:
        for p in e.passages:
            seen.setdefault(p.id, p)
    return list(seen.values())


def fusion_context(fusion: str, pool: Sequence[Evidence], budget_chars: int,
                   max_paragraph_chars: int | None = None, passages_read: int = PASSAGES_READ) -> list[str]:
    """What the `fusion` reader is shown: as much of the pool as fits `budget_chars`.

    analysis: the analyses (a piece without one shows its paragraphs instead);
    paragraph: the distinct paragraphs of the pool, in pool order;
    evidence: whole pieces (analysis + paragraphs);
    passages: the first `passages_read` distinct paragraphs of the pool (rta's k, `PASSAGES_READ`,
    unless a program reads more), as rta shows its passages.
    """
    if fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
    if budget_chars <= 0:
        raise ValueError(f"the fusion budget must be positive, got {budget_chars}")
    if fusion == "analysis":
        items = [e.analysis or " ".join(format_passages(e.passages, max_chars=max_paragraph_chars)) for e in pool]
    elif fusion in ("paragraph", "passages"):
        distinct = distinct_paragraphs(pool)
        distinct = distinct[:passages_read] if fusion == "passages" else distinct
        items = format_passages(distinct, max_chars=max_paragraph_chars)
    else:
        items = [format_evidence(e, max_paragraph_chars) for e in pool]
    return _fit(items, budget_chars)
