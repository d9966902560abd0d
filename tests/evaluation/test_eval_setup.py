"""The evaluation set-up is like for like: one answer policy for every program, sufficient
paths kept at the last level, relevance credited to what a review saw, a failed search a
recorded failure of one beam state, and the splits the papers report."""

import dspy
import pytest

from tests.fakes import FakeRetriever, Q, answering, generic_lm, passage, run, scripted_lm, tree_retriever
from treeqa.cli import default_split
from treeqa.optimize import splits_for
from treeqa.programs import PROGRAMS, BeamSearchQA, ChainOfReviews, TreeOfReviews, build_program, uses_retriever
from treeqa.signatures.review import select_for_review

# --- one answer policy -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_program_cleans_its_answer_the_same_way(name):
    retriever = FakeRetriever() if uses_retriever(name, preset="nq" if name == "beam" else None) else None
    program = build_program(name, retriever, preset="nq" if name == "beam" else None)
    with dspy.context(lm=generic_lm({"": "The answer is Paris.\nBecause it is the capital."})):
        pred = program(question="What is the capital of France?")
    assert pred.answer == "Paris", (name, pred.answer)


# --- Tree and Chain of Reviews -----------------------------------------------------------

def _sufficient_without_analysis(call):
    return {"relevant": True, "sufficient": True, "action": "accept", "next_query": "", "analysis": ""}


def test_a_sufficient_path_at_the_last_level_is_accepted_not_dropped():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 1), expansion="direct")
    pred, engine = run(program, answering(_sufficient_without_analysis))
    nodes = pred.tree["nodes"]
    # depth 1 can still search, so it does; depth 2 cannot, so its sufficient path is evidence
    assert [n["action"] for n in nodes if n["depth"] == 1] == ["search", "search"]
    assert [n["action"] for n in nodes if n["depth"] == 2] == ["accept", "accept"]
    assert len(pred.evidence) == 2 and all(len(e["ids"]) == 2 for e in pred.evidence)
    assert pred.tree["stats"]["fused_from"] == "evidence"


def test_the_chain_accepts_a_sufficient_path_on_its_last_turn():
    program = ChainOfReviews(retriever=tree_retriever(), k=2, max_turns=2, expansion="direct")
    pred, engine = run(program, answering(_sufficient_without_analysis))
    assert [n["action"] for n in pred.tree["nodes"]] == ["search", "accept"]
    assert len(pred.evidence) == 1 and len(pred.evidence[0]["ids"]) == 4


def test_the_paragraph_under_review_is_always_shown():
    path = [passage(f"P{i}", "word " * 200) for i in range(4)]
    shown, texts = select_for_review(path, max_chars_each=1000, max_total_chars=700, min_chars_each=300)
    assert shown[-1] == path[-1] and texts[-1].startswith("P3:")
    assert [p.title for p in shown] == ["P0", "P3"]  # older paragraphs fill what is left, in order


def test_relevance_is_credited_only_to_paragraphs_the_review_saw():
    long = [passage(f"L{i}", "word " * 300) for i in range(5)]
    retriever = tree_retriever(fixed={Q: long})
    program = ChainOfReviews(retriever=retriever, k=5, max_turns=1, expansion="direct", max_review_chars=700)

    def script(call):
        if call.kind == "review":
            return {"relevant": True, "sufficient": False, "action": "search", "next_query": "x", "analysis": ""}
        return {"answer": "x"}

    pred, engine = run(program, script)
    seen = engine.of("review")[0].titles
    assert len(seen) < 5 and seen[-1] == "L4"
    tiers = [p.title for p in pred.retrieved]
    assert tiers[:len(seen)] == seen  # credited (relevant) paragraphs rank first, only those seen


# --- BeamSearchQA --------------------------------------------------------------------------

class FailingSearch(FakeRetriever):
    """Fails on every query but the question itself."""

    def search_batch(self, queries, k):
        if any(q != "QQ" for q in queries):
            raise ConnectionError("index server down")
        return super().search_batch(queries, k)


def _beam_script(kind, inputs):
    return {"sub_questions": {"sub_questions": '["first", "second"]'}, "evidence": {"evidence": "facts"},
            "answer": {"answer": "ans"}, "confidence": {"confidence": "0.5"}}[kind]


@pytest.mark.parametrize("threads", [1, 3])
def test_a_failed_search_fails_that_state_only(threads):
    program = BeamSearchQA(FailingSearch(), max_queries=2, depth=1, beam_size=2, threads=threads)
    lm, _ = scripted_lm(_beam_script)
    with dspy.context(lm=lm):
        pred = program(question="QQ")
    children = [s for s in pred.tree["states"] if s["depth"] == 1]
    assert len(children) == 4 and all(s["status"] == "failed" for s in children)
    assert all(len(s["evidences"]) == len(s["sub_questions"]) for s in pred.tree["states"])
    retrieve_failures = [f for f in pred.failures if f["where"].endswith(".retrieve")]
    assert len(retrieve_failures) == 4 and retrieve_failures[0]["error"] == "ConnectionError"
    assert pred.answer == "ans" and pred.tree["stop"] == "no_new_states"  # the seeds still answer


# --- splits ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("dataset", "split"), [("hotpotqa", "dev"), ("2wikimultihopqa", "dev"), ("musique", "dev"),
                                                 ("nq", "test"), ("triviaqa", "test"), ("webq", "test")])
def test_default_split_is_the_one_the_papers_report(dataset, split):
    assert default_split(dataset) == split
    assert splits_for(dataset)[1] == split
    assert splits_for(dataset)[0] != split


def test_unknown_dataset_has_no_default_split():
    with pytest.raises(ValueError, match="unknown dataset"):
        default_split("../../x")
