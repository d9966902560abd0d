"""Decision figures from hand-built trees whose right values are counted by hand."""

import pytest

from treeqa.evaluation.decisions import beam_decisions, calibration, decisions, describe, review_decisions

GOLD = {"q1": ["g1", "g2"], "q2": ["g3", "g4"]}


def _node(i, pid, parent, depth, action, expanded=False):
    return {"node": i, "id": pid, "parent": parent, "depth": depth, "action": action,
            "relevant": action != "reject", "expanded": expanded}


TOR_RECORDS = [
    {"id": "q1", "tree": {"nodes": [
        {"node": 0, "id": None, "parent": None, "depth": 0, "action": "search", "relevant": None, "expanded": True},
        _node(1, "g1", 0, 1, "search", expanded=True),   # partial path, searched: right
        _node(2, "g2", 1, 2, "accept"),                  # full path (g1, g2), accepted: right
        _node(3, "d1", 1, 2, "accept"),                  # partial path, own paragraph a distractor, accepted: wrong
        _node(4, "d2", 0, 1, "reject"),                  # distractor rejected: right
        {"node": 5, "id": "g1", "parent": 0, "depth": 1, "action": "pruned", "relevant": None},
    ]}},
    {"id": "q2", "tree": {"nodes": [
        {"node": 0, "id": None, "parent": None, "depth": 0, "action": "search", "relevant": None, "expanded": True},
        _node(1, "g3", 0, 1, "accept"),                  # partial path accepted: wrong
        _node(2, "d3", 0, 1, "search"),                  # distractor searched (not expanded: last level)
    ]}},
    {"id": "q3", "tree": {"nodes": []}},                 # no gold paragraphs: skipped
]


def test_review_agreement_with_the_annotations():
    figures = review_decisions(TOR_RECORDS, GOLD)
    assert figures["questions"] == 2 and figures["reviews"] == 6
    assert figures["actions"] == {"accept": 3, "search": 2, "reject": 1}
    assert figures["paths"] == {"full": 1, "partial": 3, "distractor": 3}
    assert figures["accept_precision"] == pytest.approx(100 / 3, abs=0.01)  # 1 of 3 accepts is a full path
    assert figures["accept_rate_on_full_paths"] == 100.0
    assert figures["search_rate_on_partial_paths"] == pytest.approx(100 / 3, abs=0.01)  # g1 searched; d1, g3 not
    assert figures["reject_rate_on_distractors"] == pytest.approx(100 / 3, abs=0.01)   # d2 of d1, d2, d3
    assert figures["depth_histogram"] == {"1": 1, "2": 1} and figures["questions_with_expansion"] == 50.0
    assert "accept precision 33.33%" in describe(figures)


def test_verdict_probabilities_are_scored_against_the_annotations():
    import copy

    records = copy.deepcopy(TOR_RECORDS)
    p = {("q1", 1): (0.9, 0.2), ("q1", 2): (0.8, 0.7), ("q1", 3): (0.4, 0.6), ("q1", 4): (0.3, 0.1),
         ("q2", 1): (0.6, 0.9), ("q2", 2): (0.7, 0.5)}
    for record in records:
        for node in record["tree"]["nodes"]:
            if (record["id"], node["node"]) in p:
                node["p_relevant"], node["p_sufficient"] = p[(record["id"], node["node"])]
    figures = review_decisions(records, GOLD)
    # relevance: gold g1 .9, g2 .8, g3 .6 against distractors d1 .4, d2 .3, d3 .7: 8 of 9 pairs ordered (only g3 < d3)
    assert figures["relevance_auc"] == pytest.approx(8 / 9, abs=1e-3)
    # sufficiency: the full path .7 against partial paths .2, .6, .9: 2 of 3
    assert figures["sufficiency_auc"] == pytest.approx(2 / 3, abs=1e-3)
    assert review_decisions(TOR_RECORDS, GOLD)["relevance_auc"] is None  # no probabilities recorded


def test_chain_turns_are_judged_on_everything_they_saw():
    records = [{"id": "q1", "tree": {"nodes": [
        {"node": 0, "depth": 1, "action": "search", "relevant": True, "expanded": True, "ids": ["d1", "g1"]},
        {"node": 1, "depth": 2, "action": "accept", "relevant": True, "ids": ["d1", "g1", "g2"]},
    ]}}, {"id": "q2", "tree": {"nodes": [
        {"node": 0, "depth": 1, "action": "reject", "relevant": False, "ids": ["d5"]}]}}]
    figures = decisions("cor", records, GOLD)
    assert figures["accept_precision"] == 100.0 and figures["search_rate_on_partial_paths"] == 100.0
    assert figures["reject_rate_on_distractors"] == 100.0 and figures["questions_with_expansion"] == 50.0


def test_calibration_by_hand():
    out = calibration([0.9, 0.9, 0.1, 0.5], [1.0, 0.0, 0.0, 1.0])
    assert out["brier"] == pytest.approx((0.01 + 0.81 + 0.01 + 0.25) / 4)
    # bins: 0.9 -> {1, 0}: |0.9 - 0.5| = 0.4, weight 1/2; 0.1 -> {0}: 0.1, weight 1/4; 0.5 -> {1}: 0.5, weight 1/4
    assert out["ece"] == pytest.approx(0.5 * 0.4 + 0.25 * 0.1 + 0.25 * 0.5)
    assert calibration([], [])["brier"] is None
    with pytest.raises(ValueError):
        calibration([0.5], [])


def test_beam_stops_ties_and_calibration():
    def state(i, depth, answer, conf, status="kept"):
        return {"id": i, "depth": depth, "answer": answer, "confidence": conf, "status": status}

    records = [
        {"id": "q1", "answers": ["Paris"], "em": 1.0, "tree": {"stop": "threshold", "beams": [[0, 1], [2, 3]],
                                                              "states": [
            state(0, 0, "Paris", 0.9), state(1, 0, "Lyon", 0.9), state(2, 1, "Paris", 0.9),
            state(3, 1, "Nice", 0.5), state(4, 1, "", 0.0, "failed")]}},
        {"id": "q2", "answers": ["Rome"], "em": 0.0, "tree": {"stop": "no_new_states", "beams": [[0, 1]],
                                                             "states": [state(0, 0, "Rome", 0.3),
                                                                        state(1, 0, "Milan", 0.8)]}},
        {"id": "q3", "answers": ["Oslo"], "em": 0.0, "tree": {"stop": "threshold", "beams": [[0]], "states": [
            state(0, 0, "Bergen", 0.9)]}},
    ]
    figures = beam_decisions(records)
    assert figures["stop_reasons"] == {"threshold": 2, "no_new_states": 1}
    assert figures["last_beam_depth_histogram"] == {"0": 2, "1": 1}
    assert figures["beams_with_two_states"] == 3 and figures["top_two_tied"] == pytest.approx(100 / 3, abs=0.01)
    cal = figures["score_calibration"]
    assert cal["states"] == 7 and cal["accuracy"] == pytest.approx(3 / 7, abs=1e-4)  # the failed state is left out
    # q1 and q2 had a right state, q3 none; q1 returned it, q2 ranked Milan above Rome
    assert figures["right_in_tree"] == pytest.approx(200 / 3, abs=0.01)
    assert figures["right_returned_when_in_tree"] == 50.0
    assert "Brier" in describe(figures) and "returned on 50.0% of those" in describe(figures)
    # a judged beam that read only its answering state: its stop counts, its unread states do not
    judged = {"id": "q4", "answers": ["Bern"], "em": 1.0, "tree": {"stop": "threshold", "beams": [[0, 1]], "states": [
        state(0, 0, "Bern", 0.9), state(1, 0, None, 0.4)]}}
    with_judged = beam_decisions([*records, judged])
    assert with_judged["stop_reasons"] == {"threshold": 3, "no_new_states": 1}
    assert with_judged["trees_read_at_one_state"] == 1 and with_judged["score_calibration"] == cal
    assert with_judged["right_in_tree"] == figures["right_in_tree"]
    assert "1 judged trees read at their answering state only" in describe(with_judged)


def test_programs_that_do_not_search_have_no_decisions():
    assert decisions("rta", [], GOLD) is None


def test_the_decisions_script_scores_a_skip_run_against_its_own_sample(fixture_data, tmp_path):
    """`benchmarks/decisions.py` loaded the first n questions whatever the run's `--skip`, so an
    unexamined run's records met no gold; it now loads the run's own sample, and a record
    outside it is an error."""
    import importlib.util
    import json

    from treeqa.data import load_examples
    from treeqa.settings import PROJECT_ROOT

    spec = importlib.util.spec_from_file_location("decisions_script", PROJECT_ROOT / "benchmarks" / "decisions.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    first, second = load_examples("hotpotqa", "dev", n=2, seed=0)
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"program": "tor", "dataset": "hotpotqa", "split": "dev",
                                               "n": 1, "seed": 0, "skip": 1}))
    gold = second.gold_ids
    nodes = [{"node": 0, "id": None, "parent": None, "depth": 0, "action": "search", "expanded": True},
             {"node": 1, "id": gold[0], "parent": 0, "depth": 1, "action": "accept", "relevant": True}]
    record = {"id": second.id, "em": 1.0, "f1": 1.0, "tree": {"nodes": nodes}}
    (run / "predictions.jsonl").write_text(json.dumps(record) + "\n")
    _, figures = script.figures_of(run)
    assert figures["n"] == 1 and figures["actions"]["accept"] == 1
    (run / "predictions.jsonl").write_text(json.dumps({**record, "id": first.id}) + "\n")
    with pytest.raises(SystemExit, match="not questions of its spec's sample"):
        script.figures_of(run)


def test_the_decisions_script_names_a_beam_run_with_another_pick(fixture_data, tmp_path):
    """A beam evaluated with `--param pick=vote` (not re-picked) or another overridden setting is not
    labelled as the default run."""
    import importlib.util
    import json

    from treeqa.settings import PROJECT_ROOT

    spec = importlib.util.spec_from_file_location("decisions_script", PROJECT_ROOT / "benchmarks" / "decisions.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    run = tmp_path / "beam-run"
    run.mkdir()
    (run / "predictions.jsonl").write_text("")
    for params, label in (({"pick": "vote"}, "beam (nq), pick=vote"), ({}, None), ({"pick": "beam"}, None),
                          ({"threshold": 1.0}, "beam (nq), threshold=1.0")):
        (run / "spec.json").write_text(json.dumps({"program": "beam", "dataset": "hotpotqa", "split": "dev", "n": 1,
                                                   "seed": 0, "preset": "nq", "params": params}))
        assert script.figures_of(run)[0].get("label") == label
