"""`benchmarks/released_settings.py`: the priced search's record from its runs: each candidate's
pooled EM and seconds, its ratio to rta's on the same machine, the best EM within the budget; and
the committed record is what the script makes of the committed runs."""

import json

import pytest

from tests.fakes import benchmark_script
from treeqa.settings import PROJECT_ROOT

MACHINE = {"cpu": "x", "flags": ["avx2"], "cores": 2, "engine_threads": 2}


def _script():
    return benchmark_script("released_settings")


def _runs(tmp_path, script, scores: dict[str, tuple[list[float], float]], machine=MACHINE, params=None):
    """A runs folder: each side's records on every take (EM list, seconds a question)."""
    for side, (ems, seconds) in scores.items():
        for take in script.TAKES:
            folder = tmp_path / f"{take}-{side}"
            folder.mkdir(parents=True)
            records = [{"id": f"q{i}", "em": em, "f1": em, "seconds": seconds, "lm_calls": 1}
                       for i, em in enumerate(ems)]
            (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            wanted = params or script.CANDIDATES.get(side, {})
            (folder / "summary.json").write_text(json.dumps({
                "summary": {"n": len(records)}, "machine": machine, "spec": {"params": wanted},
                "command": "treeqa evaluate"}))
    return tmp_path


def test_the_best_em_within_the_budget_is_chosen_and_every_candidate_recorded(tmp_path):
    script = _script()
    runs = _runs(tmp_path, script, {"rta": ([0, 0, 1, 0], 5.0), "mpc": ([1, 1, 1, 0], 20.0),
                                    "concat": ([1, 0, 1, 0], 6.0), "linked": ([1, 1, 1, 1], 30.0),
                                    "root8-evidence2": ([1, 1, 0, 0], 7.0), "root5": ([0, 0, 1, 1], 9.0),
                                    "root8": ([1, 1, 0, 0], 6.5), "root8-root5": ([1, 1, 1, 1], 11.0)})
    record = script.record(runs)
    assert record["chosen"] == {"expansion": "concat"} and record["budget"]["within"] is True
    mpc, concat, linked, root8, root5, wide, wide_root5 = record["tried"]
    assert (linked["em"], linked["cost_ratio"]) == (100.0, 6.0)  # the best EM, but at 6 times rta's seconds
    assert (mpc["em"], mpc["cost_ratio"], concat["em"], concat["cost_ratio"]) == (75.0, 4.0, 50.0, 1.2)
    assert mpc["n"] == 4 * len(script.TAKES) and record["budget"]["baseline_seconds_per_q"] == 5.0
    assert concat["vs_mpc"]["diff"] == -25.0 and concat["vs_rta"]["wins"] == len(script.TAKES)
    assert root8["settings"] == {"expansion": "linked", "widths": [8, 3, 3], "max_evidence": 2}
    assert root8["em"] == root5["em"] == 50.0  # a tie with concat keeps the earlier candidate
    assert root5["settings"] == {"expansion": "linked", "read_root": 5} and root5["cost_ratio"] == 1.8
    assert wide["settings"] == {"expansion": "linked", "widths": [8, 3, 3]} and wide["em"] == 50.0
    assert (wide_root5["em"], wide_root5["cost_ratio"]) == (100.0, 2.2)  # over the budget of 2
    assert record["machine"] == MACHINE


def test_with_none_within_the_cheapest_is_kept_and_said(tmp_path):
    script = _script()
    record = script.record(_runs(tmp_path, script, {"rta": ([0, 1], 1.0), "mpc": ([1, 1], 20.0),
                                                    "concat": ([1, 0], 6.0), "linked": ([1, 1], 9.0),
                                                    "root8-evidence2": ([1, 1], 9.5), "root5": ([1, 1], 9.5),
                                                    "root8": ([1, 1], 9.5), "root8-root5": ([1, 1], 9.5)}))
    assert record["chosen"] == {"expansion": "concat"} and record["budget"]["within"] is False


def test_runs_of_other_settings_or_machines_are_refused(tmp_path):
    script = _script()
    with pytest.raises(SystemExit, match="not {'expansion': 'mpc'}"):
        script.record(_runs(tmp_path / "a", script, {name: ([1], 1.0) for name in ("rta", *script.CANDIDATES)},
                            params={"expansion": "cot"}))
    other = _runs(tmp_path / "b", script, {"rta": ([1], 1.0)}, machine={**MACHINE, "cpu": "y"})
    _runs(other, script, {**{name: ([1], 1.0) for name in script.CANDIDATES}, "mpc": ([1], 2.0)})
    with pytest.raises(SystemExit, match="2 machines"):
        script.record(other)


def test_the_committed_record_is_what_the_committed_runs_give():
    script = _script()
    runs = PROJECT_ROOT / "benchmarks" / "runs" / "expansion-dev"
    committed = json.loads((PROJECT_ROOT / "treeqa" / "teleprompt" / "released" / "tor.json").read_text())
    assert script.record(runs.relative_to(PROJECT_ROOT)) == committed
