"""Where a run writes: `--out` must be a run of the same spec, a new folder or an empty one, and
`treeqa view --out` overwrites only a page it wrote itself; anything else is refused in one line.
An evaluate or optimize folder holds one spec (even when it lost its spec.json), one evaluation
writes to it at a time, and a dataset's name is checked before any folder is made."""

import json

import pytest

from tests.fakes import run_cli
from treeqa.evaluation.runs import EvalSpec, claim_folder, folder_lock, run_evaluation
from treeqa.serving import view
from treeqa.settings import PROJECT_ROOT


def test_a_folder_holding_something_else_is_not_claimed(tmp_path):
    spec = EvalSpec(program="direct", n=1)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="is not empty and holds no run \\(precious.txt\\)"):
        claim_folder(tmp_path / "home", spec)
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["precious.txt"]  # nothing written
    (tmp_path / "empty").mkdir()
    claim_folder(tmp_path / "empty", spec)  # an empty folder, or a new one, becomes the run's
    claim_folder(tmp_path / "new", spec)
    claim_folder(tmp_path / "new", spec)  # and the same spec resumes there
    assert (tmp_path / "new" / "spec.json").is_file()


def test_view_overwrites_only_its_own_page(tmp_path, monkeypatch):
    monkeypatch.setattr(view, "load_run", lambda run_dir, skipped=None: {"title": "a run", "questions": []})
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    with pytest.raises(ValueError, match="is not a page `treeqa view` wrote"):
        view.write_view(tmp_path, precious)
    assert precious.read_text() == "keep me"
    with pytest.raises(ValueError, match="is a folder"):
        view.write_view(tmp_path, tmp_path)
    page = view.write_view(tmp_path, tmp_path / "page.html")
    assert page.read_text().startswith("<!doctype html>")
    view.write_view(tmp_path, page)  # its own page: written again


def test_evaluate_writes_nothing_into_a_foreign_folder(tmp_path):
    from treeqa.evaluation.runs import run_evaluation

    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds no run"):
        run_evaluation(EvalSpec(program="direct", n=1), tmp_path / "home")
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["precious.txt"]  # not even a lock


# benchmarks/faults.md, first round #1: a folder holds one spec; failed questions are retried on request

def test_1_a_folder_made_by_another_program_is_refused(scripted, tmp_path):
    assert run_cli("evaluate", "--program", "direct", "--n", "2", "--out", str(tmp_path / "R")).exit_code == 0
    result = run_cli("evaluate", "--program", "cot", "--n", "2", "--out", str(tmp_path / "R"))
    assert result.exit_code == 1 and "another spec" in result.output
    assert json.loads((tmp_path / "R" / "spec.json").read_text())["program"] == "direct"


def test_1_optimize_refuses_a_folder_of_another_optimizer(scripted, tmp_path):
    from treeqa.optimize import OptimizeSpec, run_optimize

    spec = OptimizeSpec(program="direct", dataset="hotpotqa", train=1, dev=1)
    run_optimize(spec, tmp_path / "O")
    with pytest.raises(ValueError, match="another spec"):
        run_optimize(spec.model_copy(update={"optimizer": "mipro"}), tmp_path / "O")


# benchmarks/faults.md, first round #8: settings from the command line

def test_8_out_pointing_at_a_file_is_a_clear_error(scripted, tmp_path):
    (tmp_path / "file").write_text("x")
    result = run_cli("evaluate", "--program", "direct", "--n", "1", "--out", str(tmp_path / "file"))
    assert result.exit_code == 1 and "is a file" in result.output


# benchmarks/faults.md, first round #10: names are checked before any path is made

def test_10_an_unknown_dataset_creates_no_folder(fixture_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("evaluate", "--program", "direct", "--dataset", "../../X")
    assert result.exit_code == 1 and "unknown dataset '../../X'" in result.output
    assert list(tmp_path.iterdir()) == []
    assert not (PROJECT_ROOT / "runs" / "X-dev-n30-s0").exists()


# benchmarks/faults.md, first round #11: one evaluation per folder at a time

def test_11_a_second_evaluation_into_a_busy_folder_is_refused(scripted, tmp_path):
    (tmp_path / "R").mkdir()
    with folder_lock(tmp_path / "R"):
        result = run_cli("evaluate", "--program", "direct", "--n", "1", "--out", str(tmp_path / "R"))
    assert result.exit_code == 1 and "another evaluation is writing" in result.output
    assert run_cli("evaluate", "--program", "direct", "--n", "1", "--out", str(tmp_path / "R")).exit_code == 0


# benchmarks/faults.md, second round #5: a refused resume writes nothing

def test_5_a_folder_without_spec_json_keeps_its_owner(scripted, tmp_path):
    run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "R")
    (tmp_path / "R" / "spec.json").unlink()
    with pytest.raises(ValueError, match="no spec.json but holds records of another spec"):
        run_evaluation(EvalSpec(program="cot", dataset="hotpotqa", split="dev", n=2), tmp_path / "R")
    assert not (tmp_path / "R" / "spec.json").exists()
    again = run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "R")
    assert again["summary"]["n"] == 2  # its own spec still resumes it


# benchmarks/faults.md, second round #9: a compiled.json of another optimizer is not reported under this one's name

def test_9_an_optimize_folder_that_lost_its_spec_refuses_another_optimizer(scripted, tmp_path):
    from treeqa.optimize import OptimizeSpec, run_optimize

    spec = OptimizeSpec(program="direct", dataset="hotpotqa", optimizer="bootstrap", train=1, dev=2)
    run_optimize(spec, tmp_path / "O")
    (tmp_path / "O" / "spec.json").unlink()
    with pytest.raises(ValueError, match="compiled with 'bootstrap' on 1 train questions, not 'annotated'"):
        run_optimize(spec.model_copy(update={"optimizer": "annotated"}), tmp_path / "O")
    assert not (tmp_path / "O" / "spec.json").exists()
