"""The relevance judge: a threshold on the model's P(relevant), fitted on train annotations."""

import dspy
import pytest

from tests.fakes import RECORDS, review, review_kind, scripted_lm, tree_retriever
from treeqa.programs import build_program
from treeqa.programs.compiled import load_program, save_compiled
from treeqa.teleprompt.relevance_judge import RelevanceJudge, review_cases

GOLD_TITLES = {t for r in RECORDS[:3] for t, _ in r["supporting_facts"]}


def _reviewer(with_probabilities=True):
    def respond(call):
        assert call.kind == "review"
        reply = review("search", next_query="more")  # the written verdict: always relevant
        if with_probabilities:
            reply["_p"] = {"relevant": 0.7 if call.titles[-1] in GOLD_TITLES else 0.2, "sufficient": 0.5}
        return reply
    return respond


def test_cases_are_every_gold_paragraph_and_two_distractors_per_question(train):
    hotpot, _ = train
    cases = review_cases(hotpot)
    assert sum(relevant for *_, relevant in cases) == 6  # three usable questions, two gold paragraphs each
    assert len(cases) == 6 + 1 + 2 + 1  # their distractors: one, two (capped at two) and one
    assert review_cases(hotpot, seed=3) == review_cases(hotpot, seed=3)


def test_the_judge_fits_a_threshold_that_separates_gold_from_distractors_and_it_is_saved(train, tmp_path):
    hotpot, _ = train
    lm, engine = scripted_lm(_reviewer(), classify=review_kind, whole_call=True)
    with dspy.context(lm=lm):
        compiled = RelevanceJudge(k=3).compile(build_program("tor", tree_retriever()), trainset=hotpot)
    assert len(engine.calls) == 10  # one review per case, nothing else
    assert compiled.relevance_threshold == pytest.approx(0.45)
    assert compiled.judge_fit == {"cases": 10, "scored": 10, "relevant": 6, "auc": 1.0, "balanced_accuracy": 1.0,
                                  "threshold": 0.45, "failures": 0}
    assert len(compiled.review.demos) == 3  # fitted under the annotated demos it will run with
    path = save_compiled(compiled, tmp_path / "c.json", name="tor", dataset="hotpotqa", retriever="dense")
    assert load_program(path, retriever=tree_retriever()).relevance_threshold == pytest.approx(0.45)


def test_the_judge_needs_log_probabilities(train):
    hotpot, _ = train
    lm, _ = scripted_lm(_reviewer(with_probabilities=False), classify=review_kind, whole_call=True)
    with dspy.context(lm=lm), pytest.raises(ValueError, match="log-probabilities"):
        RelevanceJudge().compile(build_program("tor", tree_retriever()), trainset=hotpot)


def test_programs_without_a_review_get_the_annotated_demos_only(train):
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call"))
    with dspy.context(lm=lm):
        compiled = RelevanceJudge().compile(build_program("rta", tree_retriever()), trainset=hotpot)
    assert engine.calls == [] and compiled.predictors()[0].demos


def test_plan_counts_one_review_per_case():
    from treeqa.optimize import OptimizeSpec, plan

    spec = OptimizeSpec(program="tor", optimizer="judge", train=5, dev=2)
    assert plan(spec)["compile_max"] == 5 * 4
    # a program without a relevance threshold would pay those calls for nothing: refused up front
    with pytest.raises(ValueError, match="programs it fits: cor, tor"):
        OptimizeSpec(program="rta", optimizer="judge", train=5, dev=2)
