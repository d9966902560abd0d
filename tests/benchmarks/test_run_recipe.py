"""`benchmarks/run.py NAME`: a recorded benchmark run again from its YAML's commands (the recipes
that were shell scripts beside the YAMLs)."""

import importlib.util
import json
import sys

import pytest
import yaml

from treeqa.settings import PROJECT_ROOT

BENCHMARKS = PROJECT_ROOT / "benchmarks"
# the YAMLs whose shell recipes were folded into run.py: their commands name every run's folder
FOLDED = ["hotpotqa-dev100", "hotpotqa-dev100-baselines", "2wikimultihopqa-dev50", "nq-test100", "triviaqa-test100",
          "webq-test100", "hotpotqa-dev-unexamined-skip100-n197", "2wikimultihopqa-dev-unexamined-skip50-n100",
          "musique-dev-unexamined-skip0-n100"]


def _runner():
    spec = importlib.util.spec_from_file_location("run_script", BENCHMARKS / "run.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script  # its dataclass looks its module up
    spec.loader.exec_module(script)
    return script


def test_commands_run_in_this_checkout_each_once_after_the_runs_they_read():
    doc = {"runs": [
        {"command": "treeqa optimize --program tor --zero-shot-from /work/main/benchmarks/runs/s/tor "
                    "--out /work/main/benchmarks/runs/s/tor-path-judge"},
        {"command": "treeqa evaluate --program rta --out benchmarks/runs/s/rta"},
        {"command": "treeqa evaluate --program tor --out /work/main/benchmarks/runs/s/tor"},
        {"command": "treeqa evaluate --program rta --out benchmarks/runs/s/rta"},  # in two YAML entries
        {"command": "treeqa evaluate --program rta --out benchmarks/runs/s/rta", "run": "rta-before-the-fix"},
        {"command": "treeqa repick benchmarks/runs/s/beam benchmarks/runs/s/beam-vote --pick vote"}],
        "comparisons": {"tor-path-judge vs tor": {}, "rta-before-the-fix vs rta": {}}, "note": "Two\n  lines."}
    runner = _runner()
    steps = runner.steps_of(doc)
    assert [s.out for s in steps] == [f"benchmarks/runs/s/{run}" for run in (
        "rta", "tor", "tor-path-judge", "rta-before-the-fix", "beam-vote")]
    assert steps[2].args[4:6] == ["--zero-shot-from", "benchmarks/runs/s/tor"]
    assert steps[3].args[-1] == "benchmarks/runs/s/rta-before-the-fix"  # a renamed run reruns into its folder
    record = runner.record_args("s", doc, steps)
    assert record[2:8] == ["s", *[s.out for s in steps]]
    assert record[8:] == ["--pair", "tor-path-judge:tor", "--pair", "rta-before-the-fix:rta", "--note", "Two lines."]


@pytest.mark.parametrize("name", FOLDED)
def test_a_folded_recipe_is_its_yamls_commands_and_its_record(name, capsys):
    assert _runner().main([name]) == 0  # printed only: running takes --run
    lines = capsys.readouterr().out.splitlines()
    assert lines.pop() == "# printed only: run again with --run to run these"
    doc = yaml.safe_load((BENCHMARKS / f"{name}.yaml").read_text())
    assert len(lines) == len({(e["command"], e.get("run")) for e in doc["runs"]}) + 1  # each run, then record
    assert all("/work/" not in line for line in lines)
    assert lines[-1].startswith(f"python benchmarks/record.py {name} benchmarks/runs/")
    for key in doc.get("comparisons") or {}:
        assert f"--pair {key.replace(' vs ', ':')}" in lines[-1]


def test_the_runner_runs_a_recorded_command_and_skips_it_once_finished(tmp_path, capsys):
    beam = tmp_path / "beam"  # a beam run without trees: re-picking it needs no model and no index
    beam.mkdir()
    (beam / "predictions.jsonl").write_text(json.dumps({"id": "q1", "question": "x", "answers": ["y"],
                                                        "prediction": "", "em": 0.0, "f1": 0.0}) + "\n")
    (beam / "spec.json").write_text(json.dumps({"program": "beam", "dataset": "webq", "params": {}}))
    recipe = tmp_path / "sample.yaml"
    recipe.write_text(yaml.safe_dump({"runs": [{"command": f"treeqa repick {beam} {tmp_path / 'vote'} --pick vote"}]}))
    runner = _runner()
    assert runner.main([str(recipe), "--no-record"]) == 0
    assert not (tmp_path / "vote").exists()  # without --run, nothing ran
    assert runner.main([str(recipe), "--run", "--no-record"]) == 0
    assert json.loads((tmp_path / "vote" / "spec.json").read_text())["params"]["pick"] == "vote"
    assert runner.main([str(recipe), "--run", "--no-record"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("# finished, skipped: treeqa repick")
    (beam / "spec.json").write_text(json.dumps({"program": "tor"}))  # a command that fails stops the recipe
    recipe.write_text(yaml.safe_dump({"runs": [{"command": f"treeqa repick {beam} {tmp_path / 'again'}"}]}))
    assert runner.main([str(recipe), "--run"]) == 1
    assert "exited 1" in capsys.readouterr().err and not (tmp_path / "again" / "summary.json").exists()


def test_a_yaml_that_names_another_program_runs_nothing(tmp_path, capsys):
    """Fifth round: a YAML in a clone could run `bash -c ...`; only treeqa's commands run, and none
    runs when one is refused."""
    marker = tmp_path / "ran"
    recipe = tmp_path / "sample.yaml"
    recipe.write_text(yaml.safe_dump({"runs": [
        {"command": f"treeqa evaluate --program rta --out {tmp_path / 'rta'}"},
        {"command": f"bash -c 'touch {marker}' --out {tmp_path / 'x'}"}]}))
    assert _runner().main([str(recipe), "--run", "--no-record"]) == 2
    assert "is not a treeqa command" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "rta").exists()
