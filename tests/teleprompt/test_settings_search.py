"""Compiling settings: a seeded search on train that keeps what scores best, saved and reloaded."""

import dspy
import pytest

from tests.fakes import answering, review, review_kind, scripted_lm, tree_retriever
from treeqa.programs import build_program
from treeqa.programs.compiled import load_program, save_compiled
from treeqa.teleprompt.metrics import em_metric
from treeqa.teleprompt.settings_choice import SettingsSearch, candidate_settings

TRAIN = [dspy.Example(id=f"t{i}", question=f"Two-hop question {i}?", answers=["right"]).with_inputs("question")
         for i in range(3)]


def test_candidates_start_with_the_programs_own_and_are_distinct_and_seeded():
    space = {"a": (1, 2), "b": ("x", "y")}
    own = {"a": 1, "b": "x", "c": 0}
    cands = candidate_settings(space, own, candidates=2, seed=0)
    assert cands[0] == own and len(cands) == 3
    assert all(c["c"] == 0 for c in cands) and len({tuple(sorted(c.items())) for c in cands}) == 3
    assert cands == candidate_settings(space, own, candidates=2, seed=0)
    assert len(candidate_settings(space, own, candidates=10)) == 4  # the whole grid, own once


def _two_paragraph_answers(call):
    """Right only when the evidence holds two-paragraph paths (what hops=2 gives)."""
    if call.kind == "fuse":
        first = (call.inputs.get("evidence") or [""])[0]
        return {"answer": "right" if first.count("Facts about") >= 2 else "wrong"}
    reasoning = "It says so." if "`reasoning`" in call.messages[0]["content"] else None  # the CoT review
    return answering(lambda c: review("accept", analysis="It is right.", reasoning=reasoning))(call)


def test_the_search_finds_the_settings_that_score_and_they_survive_a_compiled_file(tmp_path):
    program = build_program("tor", tree_retriever(), widths=[2, 2])
    lm, _ = scripted_lm(_two_paragraph_answers, classify=review_kind, whole_call=True)
    with dspy.context(lm=lm):
        compiled = SettingsSearch(em_metric, candidates=7, seed=0).compile(program, trainset=TRAIN)
    report = compiled.settings_search
    assert len(report["tried"]) == 8 and report["tried"][0]["settings"] == {} and report["tried"][0]["score"] == 0.0
    assert all(t["seconds_per_q"] >= 0 for t in report["tried"]) and "budget" not in report
    assert compiled.hops == 2 and report["chosen"]["hops"] == 2 and report["train_score"] == 100.0
    assert all(t["score"] == (100.0 if t["settings"].get("hops") == 2 else 0.0) for t in report["tried"])
    assert report["annotated_demos"] is False  # plain examples: no annotations to build demos from
    path = save_compiled(compiled, tmp_path / "c.json", name="tor", dataset="hotpotqa", retriever="dense")
    assert load_program(path, retriever=tree_retriever()).hops == 2


def test_refused_combinations_are_recorded_not_fatal():
    program = build_program("tor", tree_retriever(), widths=[2], expansion="direct")  # depth 1: hops=2 refused
    lm, _ = scripted_lm(_two_paragraph_answers, classify=review_kind, whole_call=True)
    with dspy.context(lm=lm):
        compiled = SettingsSearch(em_metric, candidates=7).compile(program, trainset=TRAIN)
    errors = [t for t in compiled.settings_search["tried"] if "error" in t]
    assert errors and all("hops" in t["error"] for t in errors)
    assert compiled.hops == 1


def test_a_program_without_settings_to_search_is_a_clear_error():
    with pytest.raises(ValueError, match="no settings to search"):
        SettingsSearch(em_metric).compile(build_program("direct"), trainset=TRAIN)


def test_plan_counts_every_candidate_on_every_train_question():
    from treeqa.optimize import OptimizeSpec, plan

    spec = OptimizeSpec(program="rta", optimizer="settings", train=5, dev=2, candidates=2)
    assert plan(spec)["compile_max"] == 5 * 3 * 1


def test_optimize_refuses_a_settings_search_on_a_program_without_settings_before_any_run():
    from treeqa.optimize import OptimizeSpec

    with pytest.raises(ValueError, match="direct has no settings to search"):
        OptimizeSpec(program="direct", optimizer="settings")


def _priced(costs: dict):
    """A scorer: each candidate's (EM, seconds a question) by its hops, rta's by its name."""
    def scorer(program, trainset):
        return costs["rta"] if type(program).name == "rta" else costs[program.hops]
    return scorer


def test_a_price_keeps_the_best_candidate_within_it_and_says_what_it_measured():
    """With --max-cost-ratio 2, hops=2 scores more but costs 3x rta's seconds: the own settings
    (1.5x) are kept; the budget's unit is rta's seconds measured in the same search."""
    program = build_program("tor", tree_retriever(), widths=[2, 2])
    search = SettingsSearch(em_metric, candidates=7, max_cost_ratio=2.0,
                            scorer=_priced({"rta": (30.0, 10.0), 1: (40.0, 15.0), 2: (50.0, 30.0)}))
    compiled = search.compile(program, trainset=TRAIN)
    report = compiled.settings_search
    assert compiled.hops == 1 and report["train_score"] == 40.0
    assert report["budget"] == {"baseline": "rta", "baseline_seconds_per_q": 10.0, "max_cost_ratio": 2.0,
                                "max_seconds_per_q": 20.0, "within": True}
    free = SettingsSearch(em_metric, candidates=7, scorer=_priced({1: (40.0, 15.0), 2: (50.0, 30.0)}))
    assert free.compile(program, trainset=TRAIN).hops == 2  # no price: EM alone


def test_with_no_candidate_within_the_price_the_cheapest_is_kept_and_marked(caplog):
    program = build_program("tor", tree_retriever(), widths=[2, 2])
    search = SettingsSearch(em_metric, candidates=7, max_cost_ratio=1.2,
                            scorer=_priced({"rta": (30.0, 10.0), 1: (40.0, 15.0), 2: (50.0, 30.0)}))
    compiled = search.compile(program, trainset=TRAIN)
    assert compiled.hops == 1 and compiled.settings_search["budget"]["within"] is False
    assert "kept the cheapest" in caplog.text


def test_a_price_needs_the_settings_search_and_is_priced_in_the_plan():
    from treeqa.optimize import OptimizeSpec, plan

    with pytest.raises(ValueError, match="--max-cost-ratio prices the settings search"):
        OptimizeSpec(program="tor", max_cost_ratio=2.0)
    spec = OptimizeSpec(program="rta", optimizer="settings", train=5, dev=2, candidates=2, max_cost_ratio=2.0)
    assert plan(spec)["compile_max"] == 5 * 3 * 1 + 5  # rta's one call a question, timed beside
    assert OptimizeSpec(program="rta", optimizer="settings").default_out() != spec.default_out()
