"""The review and fusion signatures: typed fields, the review rules, parsing, and the context budgets."""

from types import SimpleNamespace
from typing import get_args

import dspy
import pytest

from tests.fakes import passage
from treeqa.signatures.answer import clean_answer
from treeqa.signatures.formatting import format_passages
from treeqa.signatures.fusion import (
    FUSION_SIGNATURES,
    Evidence,
    format_evidence,
    fusion_context,
)
from treeqa.signatures.review import (
    CompleteMissingParagraph,
    ParagraphReview,
    ReviewWithReasoning,
    enforce_review_rules,
    review_paragraphs,
)


def test_review_fields_are_typed():
    fields = ParagraphReview.output_fields
    assert list(fields) == ["relevant", "sufficient", "action", "next_query", "analysis"]
    assert fields["relevant"].annotation is bool and fields["sufficient"].annotation is bool
    assert get_args(fields["action"].annotation) == ("reject", "search", "accept")
    assert ParagraphReview.input_fields["paragraphs"].annotation == list[str]
    assert list(ReviewWithReasoning.output_fields) == ["reasoning", *fields]
    assert list(CompleteMissingParagraph.output_fields) == ["missing_paragraph"]


def test_fusion_signatures_take_their_context():
    assert {name: list(sig.input_fields) for name, sig in FUSION_SIGNATURES.items()} == {
        "analysis": ["question", "analyses"], "paragraph": ["question", "paragraphs"],
        "evidence": ["question", "evidence"], "passages": ["question", "passages"]}
    assert all(list(sig.output_fields) == ["answer"] for sig in FUSION_SIGNATURES.values())


def test_instructions_are_short_and_our_own():
    for sig in (ParagraphReview, ReviewWithReasoning, CompleteMissingParagraph, *FUSION_SIGNATURES.values()):
        assert len(sig.instructions) < 700
        assert "I will give you" not in sig.instructions and "[RELEVANT]" not in sig.instructions


def test_chat_adapter_parses_a_typical_small_model_reply():
    reply = ("[[ ## relevant ## ]]\nTrue\n\n[[ ## sufficient ## ]]\nfalse\n\n[[ ## action ## ]]\nsearch\n\n"
             "[[ ## next_query ## ]]\nauthor of Example\n\n[[ ## analysis ## ]]\n\n\n[[ ## completed ## ]]")
    parsed = dspy.ChatAdapter().parse(ParagraphReview, reply)
    assert parsed["relevant"] is True and parsed["sufficient"] is False
    assert parsed["action"] == "search" and parsed["next_query"] == "author of Example"


def _pred(relevant, sufficient, action, next_query="", analysis=""):
    return SimpleNamespace(relevant=relevant, sufficient=sufficient, action=action, next_query=next_query,
                           analysis=analysis)


@pytest.mark.parametrize(("pred", "action", "query", "analysis", "corrected"), [
    (_pred(False, False, "reject"), "reject", "FALLBACK", "", False),
    (_pred(False, True, "accept", analysis="Paris"), "reject", "FALLBACK", "", True),  # not relevant wins
    (_pred(True, False, "search", next_query="capital of France"), "search", "capital of France", "", False),
    (_pred(True, False, "accept", analysis="Paris"), "search", "FALLBACK", "", True),
    (_pred(True, False, "search", next_query="None"), "search", "FALLBACK", "", False),
    (_pred(True, True, "accept", analysis="It is Paris."), "accept", "", "It is Paris.", False),
    (_pred(True, True, "search", next_query="x", analysis="Paris"), "accept", "", "Paris", True),
    (_pred(True, True, "accept", analysis="  "), "search", "FALLBACK", "", True),  # accept needs an analysis
])
def test_rules_decide_the_action(pred, action, query, analysis, corrected):
    outcome = enforce_review_rules(pred, fallback_query="FALLBACK")
    assert (outcome.action, outcome.next_query, outcome.analysis, outcome.corrected) == (
        action, query, analysis, corrected)
    assert outcome.query_fallback == (query == "FALLBACK")


def test_rules_need_a_fallback_query():
    with pytest.raises(ValueError):
        enforce_review_rules(_pred(True, False, "search"), fallback_query=" ")


def test_review_paragraphs_are_bounded():
    long = [passage(f"T{i}", "word " * 400) for i in range(6)]  # 2000 characters each
    shown = review_paragraphs(long, max_chars_each=800, max_total_chars=3000)
    assert len(shown) == 6 and all(len(s) <= 3000 // 6 + 10 for s in shown)
    few = review_paragraphs(long[:2], max_chars_each=800, max_total_chars=3000)
    assert all(800 <= len(s) <= 820 for s in few)
    many = review_paragraphs(long * 5, max_chars_each=800, max_total_chars=3000, min_chars_each=150)
    assert sum(len(s) for s in many) <= 3000 and len(many) < 30  # the floor holds; the tail is left out
    assert review_paragraphs([], 800, 3000) == []


def test_fusion_context_fits_the_budget_in_pool_order():
    a, b, c = passage("A"), passage("B"), passage("C")
    pool = [Evidence((a, b), "first"), Evidence((b, c), "second"), Evidence((c,), "third")]
    assert fusion_context("analysis", pool, 1000) == ["first", "second", "third"]
    assert fusion_context("analysis", pool, 12) == ["first", "second"]
    assert fusion_context("paragraph", pool, 1000) == ["A: Facts about A.", "B: Facts about B.", "C: Facts about C."]
    evidence = fusion_context("evidence", pool, 1000)
    assert evidence[0] == format_evidence(pool[0])
    assert evidence[0] == "Analysis: first\nParagraphs:\n- A: Facts about A.\n- B: Facts about B."
    assert len(fusion_context("evidence", pool, len(evidence[0]) + 5)) == 1


def test_passages_fusion_shows_the_first_five_distinct_paragraphs_as_rta_does():
    ps = [passage(t) for t in "ABCDEFG"]
    pool = [Evidence((ps[0], ps[1]), "first"), Evidence((ps[1], ps[2]), "second"),
            *(Evidence((p,), "more") for p in ps[3:])]
    assert fusion_context("passages", pool, 10_000) == format_passages(ps[:5])
    assert fusion_context("passages", pool, 10_000, max_paragraph_chars=8) == format_passages(ps[:5], 8)


def test_fusion_context_cuts_a_single_oversized_piece():
    huge = Evidence((passage("A", "word " * 1000),), "x")
    (only,) = fusion_context("evidence", [huge], 300)
    assert len(only) <= 302


def test_analysis_fusion_shows_paragraphs_when_a_piece_has_no_analysis():
    assert fusion_context("analysis", [Evidence((passage("A"),))], 100) == ["A: Facts about A."]


@pytest.mark.parametrize(("raw", "clean"), [
    ("Paris", "Paris"), ("The answer is Paris.", "Paris"), ("Answer: Jane Doe", "Jane Doe"),
    ("Paris.\nBecause ...", "Paris"), ("Answers in Genesis", "Answers in Genesis"), ("", ""), (None, ""),
])
def test_clean_answer(raw, clean):
    assert clean_answer(raw) == clean


def test_unknown_fusion_is_rejected():
    with pytest.raises(ValueError, match="fusion"):
        fusion_context("vote", [], 100)
