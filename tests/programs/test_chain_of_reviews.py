"""ChainOfReviews: one path, every turn reviews all paragraphs retrieved so far, at most 3 turns."""

import json

import dspy
import pytest

from tests.fakes import Q, answering, passage, review, run, tree_retriever
from treeqa.programs.chain_of_reviews import ChainOfReviews
from treeqa.signatures.review import ReviewWithReasoning


def by_turn(actions, **kw):
    """Review replies by turn number (1-based), judged from how many paragraphs the review sees."""
    def review_fn(call):
        turn = len(call.titles) // 5
        action = actions[turn - 1]
        return review(action, next_query=f"query after turn {turn}", analysis="Jane Doe wrote it.", **kw)
    return answering(review_fn, answer="Jane Doe")


def test_defaults_follow_the_paper():
    program = ChainOfReviews(retriever=tree_retriever())
    assert (program.k, program.max_turns, program.expansion, program.fusion) == (5, 3, "cot", "evidence")
    assert program.review.signature.instructions == ReviewWithReasoning.instructions


def test_each_turn_reviews_everything_retrieved_so_far():
    retriever = tree_retriever()
    program = ChainOfReviews(retriever=retriever, expansion="direct")
    pred, engine = run(program, by_turn(["search", "search", "search"]))
    reviews = engine.of("review")
    assert [len(c.titles) for c in reviews] == [5, 10, 15]
    # each turn asks for k + (paragraphs so far) and keeps the first k new ones
    assert reviews[2].titles == [f"N{i}" for i in [*range(1, 11), *range(16, 21)]]
    assert [k for _, k in retriever.queries] == [5, 10, 15]
    assert [q for q, _ in retriever.queries] == [Q, "query after turn 1", "query after turn 2"]
    assert len(engine.of("fuse")) == 1 and pred.evidence == []  # never accepted: fused from all paragraphs
    assert pred.tree["stats"]["fused_from"] == "fallback"
    assert len(engine.of("fuse")[0].inputs["evidence"]) == 15
    assert [n["expanded"] for n in pred.tree["nodes"]] == [True, True, False]
    assert [n["parent"] for n in pred.tree["nodes"]] == [None, 0, 1]


def test_accept_ends_the_chain_with_one_piece_of_evidence():
    program = ChainOfReviews(retriever=tree_retriever(), expansion="direct")
    pred, engine = run(program, by_turn(["search", "accept"]))
    assert len(engine.of("review")) == 2
    (piece,) = pred.evidence
    assert piece["titles"] == [f"N{i}" for i in range(1, 11)] and piece["analysis"] == "Jane Doe wrote it."
    assert pred.answer == "Jane Doe" and [p.title for p in pred.retrieved][:10] == piece["titles"]


def test_reject_ends_the_chain():
    program = ChainOfReviews(retriever=tree_retriever(), expansion="direct")
    pred, engine = run(program, by_turn(["reject"]))
    assert len(engine.of("review")) == 1 and pred.tree["nodes"][0]["action"] == "reject"
    assert engine.of("fuse")[0].inputs["evidence"][0].startswith("Analysis: (none)")


def test_later_turns_only_add_new_paragraphs():
    a, b, c = passage("A"), passage("B"), passage("C")
    retriever = tree_retriever(fixed={Q: [a, b], "next": [b, a, c]})
    program = ChainOfReviews(retriever=retriever, k=2, max_turns=2, expansion="direct")
    _, engine = run(program, answering(lambda call: review("search", next_query="next")))
    assert [c.titles for c in engine.of("review")] == [["A", "B"], ["A", "B", "C"]]


def test_mpc_expansion_in_the_chain():
    retriever = tree_retriever()
    program = ChainOfReviews(retriever=retriever, max_turns=2, expansion="mpc")
    _, engine = run(program, answering(lambda c: review("search"), missing=lambda c: "Example is a novel by Jane Doe."))
    assert len(engine.of("complete")) == 1 and len(engine.of("complete")[0].titles) == 5
    assert retriever.queries[1][0] == "Example is a novel by Jane Doe."


def test_reviews_stay_within_the_paragraph_budget():
    retriever = tree_retriever(fixed={Q: [passage(f"L{i}", "word " * 300) for i in range(5)]})
    program = ChainOfReviews(retriever=retriever, expansion="direct", max_turns=2, max_review_chars=2000)
    _, engine = run(program, answering(lambda c: review("search", next_query="more")))
    for call in engine.of("review"):
        assert sum(len(p) for p in call.inputs["paragraphs"]) <= 2000


def test_a_failed_review_ends_the_chain_and_is_recorded():
    def script(call):
        if call.kind == "review" and len(call.titles) == 10:
            return TimeoutError("slow")
        return review("search", next_query="more") if call.kind == "review" else {"answer": "x"}

    program = ChainOfReviews(retriever=tree_retriever(), expansion="direct")
    pred, engine = run(program, script)
    assert len(engine.of("review")) == 2 and pred.answer == "x"
    assert pred.tree["nodes"][1]["action"] == "reject"
    assert pred.tree["nodes"][1]["failures"][0]["where"] == "review@turn2"
    assert pred.tree["stats"]["review_failures"] == 1
    json.dumps(pred.tree)


def test_needs_a_retriever_and_a_question():
    with pytest.raises(ValueError, match="retriever"):
        ChainOfReviews()
    with pytest.raises(ValueError, match="question is empty"):
        ChainOfReviews(retriever=tree_retriever())(question="")


def test_save_load_round_trip(tmp_path):
    program = ChainOfReviews(retriever=tree_retriever())
    program.fuse.demos = [dspy.Example(question="q", evidence=["Analysis: a"], answer="a")]
    program.save(str(tmp_path / "cor.json"))
    fresh = ChainOfReviews(retriever=tree_retriever())
    fresh.load(str(tmp_path / "cor.json"))
    assert fresh.dump_state() == program.dump_state()
    assert [name for name, _ in fresh.named_predictors()] == ["review", "fuse"]
