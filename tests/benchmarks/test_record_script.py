"""`benchmarks/record.py`, the script that writes a benchmark's YAML (which records a pair reads),
and the rows `results_page.py` makes of its entries."""

import importlib.util
import json

from treeqa.settings import PROJECT_ROOT


def _script(name="record"):
    spec = importlib.util.spec_from_file_location(f"{name}_script", PROJECT_ROOT / "benchmarks" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _run(root, folder, program, ems):
    run = root / folder
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"program": program}))
    (run / "predictions.jsonl").write_text("".join(
        json.dumps({"id": f"q{i}", "question": f"q{i}", "prediction": "x", "em": em, "f1": em}) + "\n"
        for i, em in enumerate(ems)))
    return run


def test_two_runs_of_one_program_pair_by_their_folders(tmp_path):
    """Two evaluate runs of the beam (the paper's preset and `evidence=retrieval`) were both named
    "beam", so the later one's records stood in for "beam" too and "beam-retrieval:beam" paired a
    run with itself; a folder's name now always means that folder's records."""
    beam = _run(tmp_path, "beam", "beam", [0, 0, 0, 1])
    retrieval = _run(tmp_path, "beam-retrieval", "beam", [1, 1, 1, 1])
    rta = _run(tmp_path, "rta", "rta", [0, 1, 0, 1])
    pairs = _script()._pairs([beam, rta, retrieval], ["beam-retrieval:beam", "beam:rta", "beam-retrieval:rta"])
    assert pairs["beam-retrieval vs beam"]["em"]["diff"] == 75.0
    assert pairs["beam vs rta"]["em"]["diff"] == -25.0
    assert pairs["beam-retrieval vs rta"]["em"]["diff"] == 50.0


def test_a_program_name_never_stands_for_one_of_two_runs(tmp_path):
    """With the zero-shot "tor" run still unfinished (not recorded), "tor" meant the compiled
    `evaluate --compiled` run, the other run of program tor, and "tor-path-judge-read-3:tor" paired
    that run with itself; a name that is no run's folder is now skipped."""
    compiled = _run(tmp_path, "tor-path-judge-read-3", "tor", [1, 0])
    rta = _run(tmp_path, "rta", "rta", [0, 0])
    pairs = _script()._pairs([compiled, rta], ["tor-path-judge-read-3:tor", "tor-path-judge-read-3:rta"])
    assert list(pairs) == ["tor-path-judge-read-3 vs rta"]
    other = _run(tmp_path, "beam-retrieval", "beam", [1, 1])
    beam = _run(tmp_path, "beam-x", "beam", [0, 0])
    assert _script()._pairs([other, beam], ["beam:beam-x"]) == {}


def test_each_entry_and_table_row_names_its_run_folder(tmp_path):
    """A run kept under a new folder name (iterretgen-no-retry, the run before a fix) beside a
    rerun of the same program had two table rows both called "iterretgen"."""
    script = _script()
    for folder in ("iterretgen", "iterretgen-no-retry"):
        run = _run(tmp_path, folder, "iterretgen", [1, 0])
        (run / "summary.json").write_text(json.dumps({"summary": {"n": 2}, "command": "treeqa evaluate",
                                                      "spec": {"program": "iterretgen"}, "versions": {}}))
    entries = [script._entry(tmp_path / folder) for folder in ("iterretgen", "iterretgen-no-retry")]
    assert [e["run"] for e in entries] == ["iterretgen", "iterretgen-no-retry"]
    assert [_script("results_page")._label(e) for e in entries] == ["iterretgen", "iterretgen `iterretgen-no-retry`"]


def test_an_optimize_run_pairs_by_its_compiled_records_before_its_zero_shot_side_finishes(tmp_path):
    """optimize runs its zero-shot side last, so a long one has compiled records and no report
    for hours; its folder then stands for the compiled records, and its entry says so."""
    run = tmp_path / "tor-path-judge-read-3-reader"
    run.mkdir()
    compiled = _run(run, "compiled", "tor", [1, 1, 0])
    (compiled / "summary.json").write_text(json.dumps({"command": "treeqa optimize", "spec": {"program": "tor"},
                                                       "versions": {}, "summary": {"n": 3, "em": 66.7}}))
    _run(run, "zero-shot", "tor", [0])  # unfinished
    (run / "spec.json").write_text(json.dumps({"program": "tor", "optimizer": "path-judge+reader"}))
    rta = _run(tmp_path, "rta", "rta", [0, 1, 0])
    script = _script()
    pairs = script._pairs([run, rta], ["tor-path-judge-read-3-reader:rta"])
    assert round(pairs["tor-path-judge-read-3-reader vs rta"]["em"]["diff"], 1) == 33.3
    entry = script._entry(run)
    assert entry["kind"].startswith("optimize, compiled side only") and entry["figures"]["n"] == 3
    # its spec is the optimize run's, and the benchmarks table shows its compiled row alone
    # (building that table raised KeyError on such an entry)
    assert _script("results_page")._variants(entry) == [("compiled (path-judge+reader)", entry["figures"])]


def test_a_repicked_run_says_which_run_its_trees_came_from():
    def entry(source):
        return {"kind": "evaluate", "figures": {"em": 1.0},
                "spec": {"program": "beam", "preset": "nq", "params": {"pick": "vote", "_repicked_from": source}}}

    script = _script("results_page")
    assert script._variants(entry("benchmarks/runs/nq-test100/beam-compiled/compiled")) == [
        ("re-picked from beam-compiled", {"em": 1.0})]
    assert script._variants(entry("benchmarks/runs/nq-test100/beam"))[0][0] == "re-picked from beam"
    assert script._label(entry("x")) == "beam (nq) {'pick': 'vote'}"


def test_an_optimize_run_without_its_zero_shot_side_records_the_compiled_row_alone(tmp_path):
    """optimize --no-zero-shot writes a report whose zero-shot side is None: the entry keeps it
    None and the table shows the compiled row alone (a KeyError/TypeError otherwise)."""
    run = tmp_path / "composed"
    run.mkdir()
    _run(run, "compiled", "tor", [1, 0])
    figures = {"n": 2, "em": 50.0}
    (run / "report.json").write_text(json.dumps({
        "command": "treeqa optimize --no-zero-shot", "spec": {"program": "tor", "optimizer": "path-judge+reader"},
        "compile": {}, "versions": {}, "zero_shot": None, "compiled": figures}))
    script = _script()
    entry = script._entry(run)
    assert entry["zero_shot"] is None and entry["compiled"] == figures
    assert _script("results_page")._variants(entry) == [("compiled (path-judge+reader)", figures)]


def _evaluated(root, folder, ems):
    run = _run(root, folder, "rta", ems)
    (run / "summary.json").write_text(json.dumps({"summary": {"n": len(ems), "em": 100 * sum(ems) / len(ems)},
                                                  "command": f"treeqa evaluate --out {folder}",
                                                  "spec": {"program": "rta"}, "versions": {}}))
    return run


def test_added_runs_keep_the_recorded_ones_and_pair_with_runs_beside_them(tmp_path):
    """A sample's YAML grew by hand-merged snippets, one adapter at a time; `--add` records a run
    into it: earlier entries, note and comparisons stay, and a pair may name a run recorded
    before (found in the added run's folder) without recording it again."""
    script = _script()
    rta = _evaluated(tmp_path, "rta", [0, 1, 0, 0])
    doc = {"note": "First runs.", "runs": [script._entry(rta)], "comparisons": {"tor vs rta": {"em": {}}}}
    lora = _evaluated(tmp_path, "rta-lora", [1, 1, 0, 1])
    grown = script.added(doc, [lora], "Then an adapter.", ["rta-lora:rta"])
    assert [entry["run"] for entry in grown["runs"]] == ["rta", "rta-lora"]
    assert grown["note"] == "First runs. Then an adapter."
    assert grown["comparisons"]["rta-lora vs rta"]["em"]["diff"] == 50.0
    assert "tor vs rta" in grown["comparisons"]
    (rta / "summary.json").write_text(json.dumps({"summary": {"n": 4, "em": 50.0}, "command": "rerun",
                                                  "spec": {"program": "rta"}, "versions": {}}))
    rerun = script.added(grown, [rta], "", [])
    assert [entry["run"] for entry in rerun["runs"]] == ["rta", "rta-lora"]
    assert rerun["runs"][0]["command"] == "rerun" and rerun["note"] == grown["note"]


def test_added_runs_keep_entries_recorded_before_runs_had_names(tmp_path):
    """The older YAMLs (NQ's, TriviaQA's) hold entries without a `run:` name; `--add` keeps them as
    they are and appends the new run (it raised KeyError: 'run')."""
    script = _script()
    rta = _evaluated(tmp_path, "rta", [0, 1, 0, 0])
    old = {k: v for k, v in script._entry(rta).items() if k != "run"}
    beam = _evaluated(tmp_path, "beam", [1, 1, 0, 0])
    grown = script.added({"note": "Old.", "runs": [old]}, [beam], "", ["beam:rta"])
    assert grown["runs"][0] == old and grown["runs"][1]["run"] == "beam"
    assert grown["comparisons"]["beam vs rta"]["em"]["diff"] == 25.0
