"""Reviewing the paragraphs on a reasoning path (Tree of Reviews, Sec. 3.2 and 3.4).

A review judges the paragraphs together: are they relevant to the question, are they
sufficient to answer it, and so which action follows (reject, search, accept). The
model's three answers can disagree, so `enforce_review_rules` derives the action from
the two judgments after parsing, and guarantees what each action needs: a search has a
non-empty query, an accept has an analysis.

Expansion strategies (how the next query is made) live here too: `ParagraphReview`
writes the query directly, `ReviewWithReasoning` thinks first (CoT expansion), and
`CompleteMissingParagraph` writes the paragraph that is missing, whose text becomes
the query (Missing Paragraph Completion, MPC).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import dspy

from treeqa.data.corpus import Passage
from treeqa.signatures.formatting import format_passages

Action = Literal["reject", "search", "accept"]

_RELEVANT = "True if at least one paragraph gives a fact that helps answer the question"
_SUFFICIENT = ("True only if the paragraphs together state every fact the answer needs; a question about "
               "two things, or one that needs a second step, needs facts for each of them")
_ACTION = "reject if not relevant; search if relevant but not sufficient; accept if sufficient"
_NEXT_QUERY = "for search: a short search query for the missing fact; otherwise leave empty"
_ANALYSIS = "for accept: one short sentence that answers the question from the paragraphs; otherwise leave empty"
_PARAGRAPHS = "the paragraphs on the reasoning path, each as 'Title: text'; judge them as a whole"


class ParagraphReview(dspy.Signature):
    """Review paragraphs retrieved for a multi-hop question, taken together.

    relevant: does any paragraph bring us closer to the answer?
    sufficient: do the paragraphs hold all the facts the answer needs? A multi-hop
    question usually needs facts from more than one paragraph, so check every part.
    Then choose the action: reject when nothing is relevant; search when something
    is still missing, and name the missing fact in next_query; accept when the
    paragraphs are sufficient, and answer the question in analysis."""

    max_tokens: ClassVar[int] = 160  # two verdicts, the action, a short query, a one-sentence analysis

    question: str = dspy.InputField()
    paragraphs: list[str] = dspy.InputField(desc=_PARAGRAPHS)
    relevant: bool = dspy.OutputField(desc=_RELEVANT)
    sufficient: bool = dspy.OutputField(desc=_SUFFICIENT)
    action: Action = dspy.OutputField(desc=_ACTION)
    next_query: str = dspy.OutputField(desc=_NEXT_QUERY)
    analysis: str = dspy.OutputField(desc=_ANALYSIS)


_REASONING = dspy.OutputField(desc="the facts given and the fact still missing, in two or three sentences")


class ReviewWithReasoning(ParagraphReview.prepend("reasoning", _REASONING, type_=str)):
    """Review paragraphs retrieved for a multi-hop question, taken together.

    First reason step by step: which facts do the paragraphs give, and which fact is
    still missing for the answer? Then judge relevant (does any paragraph bring us
    closer to the answer?) and sufficient (do they hold all the facts needed, for
    every part of the question?), and
    choose the action: reject when nothing is relevant; search when a fact is missing,
    with a query for exactly that fact in next_query; accept when sufficient, with the
    answer to the question in analysis."""

    # ParagraphReview's fields with `reasoning` first (CoT expansion); only the
    # instructions and the budget are its own
    max_tokens: ClassVar[int] = 352  # the same plus a few sentences of reasoning


class CompleteMissingParagraph(dspy.Signature):
    """The paragraphs do not yet hold everything needed to answer the question.

    From your own knowledge, write the paragraph that is missing: a short
    encyclopedia-style text stating the missing facts and naming the people, places
    or works involved. It is used as a search query, so be specific."""

    max_tokens: ClassVar[int] = 192  # one short paragraph (the query is cut to 600 characters anyway)

    question: str = dspy.InputField()
    paragraphs: list[str] = dspy.InputField(desc="the paragraphs found so far, each as 'Title: text'")
    missing_paragraph: str = dspy.OutputField(desc="two or three sentences with the missing facts")



class NameBridgeEntity(dspy.Signature):
    """The paragraphs answer the first part of the question; the rest is about something they name.

    Give the name of that person, place, work or organisation: the one whose own facts the rest of
    the question asks for. Copy the name as the paragraphs spell it, and write nothing else."""

    max_tokens: ClassVar[int] = 32  # a name of a few words, with the reply's field markers

    question: str = dspy.InputField()
    paragraphs: list[str] = dspy.InputField(desc="the paragraphs found so far, each as 'Title: text'")
    entity: str = dspy.OutputField(desc="the name, a few words")

@dataclass(frozen=True)
class ReviewOutcome:
    """A review after the rules: `action` always agrees with the two judgments.

    `corrected` says the model's own action was overridden (a measure of how well the
    model follows the rules); `query_fallback` says the search query was made in code;
    `seen_ids` are the paragraphs the review was shown (the only ones its judgment covers);
    `p_relevant` / `p_sufficient` are the model's probabilities of its two verdicts (None
    where the LM gave no log-probabilities); `judge_relevant` / `judge_sufficient` are a
    compiled path judge's (`treeqa.judging.path_judge`), where one decided; `judge_only` says the
    judge decided the path without an LM call.
    """

    relevant: bool
    sufficient: bool
    action: str
    next_query: str
    analysis: str
    reasoning: str = ""
    corrected: bool = False
    query_fallback: bool = False
    seen_ids: tuple[str, ...] = ()
    p_relevant: float | None = None
    p_sufficient: float | None = None
    judge_relevant: float | None = None
    judge_sufficient: float | None = None
    judge_only: bool = False


def clean_text(value) -> str:
    """A free-text output, with the placeholders small models write for 'empty' removed."""
    text = " ".join(str(value or "").split())
    return "" if text.lower().strip(".[]()'\"") in {"", "none", "n/a", "na", "empty", "null"} else text


def _flag(value) -> bool:
    if isinstance(value, str):
        return value.strip().strip("[]").lower() in {"true", "yes", "relevant", "supported", "sufficient"}
    return bool(value)


def enforce_review_rules(prediction, fallback_query: str, can_search: bool = True, can_accept: bool = True,
                         relevant: bool | None = None, sufficient: bool | None = None,
                         require_analysis: bool = True) -> ReviewOutcome:
    """Derive the action from the judgments and make it complete.

    - not relevant: reject (whatever `sufficient` says);
    - relevant, not sufficient: search; an empty `next_query` becomes `fallback_query`;
    - sufficient: accept with the analysis. Without an analysis it is a search while the
      path can still grow (an answer may come with the next paragraph); where it cannot
      (`can_search=False`: the tree's last level, the chain's last turn) the sufficient
      path is accepted with its paragraphs alone rather than dropped;
    - `can_accept=False` (the path is shorter than the question's hops): a sufficient verdict
      is not trusted and the path is searched on, while it can be.

    Every outcome but accept carries a non-empty `next_query` (a rejected path is still
    expanded when relevance pruning is off); an accept carries no query.

    Args:
        prediction: the parsed review (any object with the review's output attributes).
        fallback_query: the query to search with when the model wrote none; must not be empty.
        can_search: whether a search could still expand this path.
        can_accept: whether the path is long enough to be accepted.
        relevant: the relevance decision when a judge other than the written verdict made it.
        sufficient: the same for sufficiency.
        require_analysis: False where a judge other than the model decided sufficiency: a
            sufficient path is accepted with or without the model's analysis. `prediction`
            may then be None (the judge alone decides; no query, no analysis).
    """
    if not fallback_query.strip():
        raise ValueError("fallback_query must not be empty")
    if relevant is None:
        relevant = _flag(getattr(prediction, "relevant", False))
    if sufficient is None:
        sufficient = _flag(getattr(prediction, "sufficient", False))
    said = str(getattr(prediction, "action", "") or "").strip().lower()
    next_query = clean_text(getattr(prediction, "next_query", ""))
    analysis = clean_text(getattr(prediction, "analysis", ""))
    reasoning = clean_text(getattr(prediction, "reasoning", ""))

    if not relevant:
        action = "reject"
    elif sufficient and (can_accept or not can_search) and (analysis or not can_search or not require_analysis):
        action = "accept"
    else:
        action = "search"
    # a rejected path keeps a query too: without relevance pruning it is expanded all the same
    query_fallback = action != "accept" and not next_query
    if query_fallback:
        next_query = fallback_query
    return ReviewOutcome(
        relevant=relevant, sufficient=sufficient, action=action,
        next_query=next_query if action != "accept" else "",
        analysis=analysis if action == "accept" else "",
        reasoning=reasoning, corrected=said != action, query_fallback=query_fallback,
    )


def select_for_review(passages: Sequence[Passage], max_chars_each: int, max_total_chars: int,
                      min_chars_each: int = 150) -> tuple[list[Passage], list[str]]:
    """The paragraphs a review sees, and their texts, bounded so the prompt fits the window.

    Every paragraph is cut to `max_chars_each`; when they still exceed `max_total_chars`
    each is cut evenly (not below `min_chars_each`, since a paragraph's first sentences
    carry its main facts). If even that is too much, the newest paragraph (the last, the
    one under judgment) is always kept and the older ones fill the rest in path order.
    """
    if not passages:
        return [], []
    overhead = max(len(p.title) for p in passages) + 4  # "Title: " and the " …" of a cut text
    each = max(min_chars_each, min(max_chars_each, max_total_chars // len(passages) - overhead))
    texts = format_passages(passages, max_chars=each)
    keep, used = [], len(texts[-1])
    for i, text in enumerate(texts[:-1]):
        if used + len(text) > max_total_chars:
            break
        keep.append(i)
        used += len(text)
    keep.append(len(texts) - 1)
    return [passages[i] for i in keep], [texts[i] for i in keep]


def review_paragraphs(passages: Sequence[Passage], max_chars_each: int, max_total_chars: int,
                      min_chars_each: int = 150) -> list[str]:
    """The texts of `select_for_review`."""
    return select_for_review(passages, max_chars_each, max_total_chars, min_chars_each)[1]
