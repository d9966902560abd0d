"""Tree and Chain of Reviews on real HotpotQA dev questions: the embedded model, the dense
retriever over the pooled corpus. Small trees (widths 3, 2; depth 2) keep it to minutes.

Run under the shared CPU lock:
    flock /tmp/treeqa-cpu.lock .venv/bin/python -m pytest tests/integration/test_tor_integration.py -m integration -s -q
"""

import json

import dspy
import pytest

from tests.fakes import requires_shared_data, run_measured
from treeqa.evaluation.metrics import exact_match, f1_score, recall_at_k
from treeqa.lm import adapter_for, local_engine
from treeqa.programs.chain_of_reviews import ChainOfReviews
from treeqa.programs.tree_of_reviews import TreeOfReviews

pytestmark = [pytest.mark.integration, requires_shared_data]


def _summary(program, example, pred, measured: dict) -> dict:
    """One question's figures as this module prints them (`run_measured` measures and prints)."""
    ids = [p.id for p in pred.retrieved]
    return {
        "question": example.question, "gold": list(example.answers), "answer": pred.answer,
        "em": exact_match(pred.answer, example.answers), "f1": round(f1_score(pred.answer, example.answers), 3),
        "recall@15": round(recall_at_k(ids, example.gold_ids, 15), 3), **measured,
        "stats": pred.tree["stats"], "failures": [f["where"] + ": " + f["error"] for f in pred.failures],
    }


def test_tree_of_reviews_on_real_questions(real_hotpot):
    lm, retriever, examples = real_hotpot
    program = TreeOfReviews(retriever=retriever, widths=(3, 2), depth=2)
    summaries = []
    for example in examples:
        pred, summary = run_measured(program, lm, example, _summary)
        summaries.append(summary)
        stats = pred.tree["stats"]
        assert isinstance(pred.answer, str)
        assert stats["nodes"] <= 1 + 3 + 3 * 2 and stats["reviews"] <= 9
        assert stats["completions"] <= 3  # MPC: one per expanded depth-1 node
        assert 1 <= len(pred.retrieved) <= 9
        assert all(e["analysis"] for e in pred.evidence)
        json.dumps(pred.tree)
    reviews = sum(s["stats"]["reviews"] for s in summaries)
    failed = sum(s["stats"]["review_failures"] for s in summaries)
    assert failed <= reviews // 2, f"{failed} of {reviews} reviews failed to parse"
    assert any(s["answer"] for s in summaries)


def test_chain_of_reviews_on_a_real_question(real_hotpot):
    lm, retriever, examples = real_hotpot
    pred, summary = run_measured(ChainOfReviews(retriever=retriever, max_turns=2), lm, examples[0], _summary)
    assert isinstance(pred.answer, str) and pred.tree["stats"]["reviews"] <= 2
    assert 5 <= len(pred.retrieved) <= 10


def test_hops_make_the_tree_grow_and_reviews_carry_the_models_probabilities(real_hotpot):
    lm, retriever, examples = real_hotpot
    pred, summary = run_measured(TreeOfReviews(retriever=retriever, widths=(2, 2), depth=2, hops=2), lm,
                                 examples[0], _summary)
    nodes = [n for n in pred.tree["nodes"] if n.get("relevant") is not None]
    assert all(0.0 <= n["p_relevant"] <= 1.0 and 0.0 <= n["p_sufficient"] <= 1.0 for n in nodes)
    assert all(len(e["ids"]) == 2 for e in pred.evidence)  # nothing accepted on one paragraph
    depth1 = [n for n in nodes if n["depth"] == 1]
    assert all(n["action"] in ("search", "reject") for n in depth1)
    assert any(n["relevant"] for n in depth1) == any(n["depth"] == 2 for n in nodes)  # relevant -> searched on


def test_the_query_writer_compiles_on_real_annotated_paths_and_a_rerun_replays(real_hotpot, tmp_path):
    """`--optimizer query` end to end on the embedded model: MPC paragraphs written for real
    HotpotQA train paths, scored by the dense search with them; every answer is logged, so the
    same compile again makes no LM call."""
    from treeqa.data import load_examples
    from treeqa.teleprompt.query_writer import QueryWriterFit

    lm, retriever, _ = real_hotpot
    train = load_examples("hotpotqa", "train", n=2)
    program = TreeOfReviews(retriever=retriever, widths=(3, 2), depth=2)
    engine = local_engine()

    def compile_once():
        calls_before = engine.stats.calls
        with dspy.context(lm=lm, adapter=adapter_for(lm)):
            compiled = QueryWriterFit(calls_path=tmp_path / "query-calls.jsonl", max_demos=1,
                                      candidates=1).compile(program, trainset=train)
        return compiled, engine.stats.calls - calls_before

    compiled, calls = compile_once()
    fit = compiled.query_fit
    print("\n" + json.dumps({"query_fit": fit, "lm_calls": calls}))
    assert fit["examples"] == 4 and 0 < calls <= 2 * 2 * (1 + 3)
    assert 0.0 <= fit["prepared_hit_rate"] <= 100.0 and fit["kept"] in ("prepared", "compiled")
    assert 1 <= (tmp_path / "query-calls.jsonl").read_text().count("\n") <= calls  # a parse retry is a call too
    again, calls_again = compile_once()
    assert calls_again == 0 and again.query_fit == fit
