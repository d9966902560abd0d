"""Run folders belong to one kind of run: optimize claims and locks its folder before the index
and the compile (as evaluate does), a folder of the other kind is refused by name, and the two
sides of an optimize carry their side, so a compiled side never passes for a zero-shot run."""

import json

import pytest
from filelock import FileLock

from tests.fakes import generic_lm, use_lm
from treeqa.evaluation.runs import EvalSpec, run_evaluation
from treeqa.optimize import OptimizeSpec, run_optimize

ANSWERS = {"Rigi Railway company": "Lake Zurich", "cog railway": "1871", "Which mountain": "Mount Rigi", "Weggis": "no"}


@pytest.fixture
def lm(fixture_data, monkeypatch):
    return use_lm(monkeypatch, generic_lm(ANSWERS))


def _spec(**kw):
    return OptimizeSpec(**{"program": "direct", "dataset": "hotpotqa", "train": 1, "dev": 2, **kw})


def _plain():
    """The zero-shot evaluation an optimize of `_spec()` runs on its dev questions."""
    return EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2)


def test_4_optimize_refuses_a_non_empty_folder_that_holds_no_optimize_run(lm, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my notes")
    with pytest.raises(ValueError, match=r"not empty and holds no optimize run \(report.md\)"):
        run_optimize(_spec(), out)
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]  # not even a lock
    (out / "compiled.json").write_text("{}")  # a file of the user's, not a compiled program
    with pytest.raises(ValueError, match="not a treeqa compiled program"):
        run_optimize(_spec(), out)
    assert (out / "report.md").read_text() == "my notes" and (out / "compiled.json").read_text() == "{}"
    assert not (out / "spec.json").exists() and lm._engine_spec.calls == []


def test_4_a_second_optimize_into_one_folder_is_refused_before_any_lm_call(lm, tmp_path, monkeypatch):
    out = tmp_path / "O"
    out.mkdir()
    built = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: built.append(a))
    with FileLock(out / ".lock"):  # the first optimize, still running
        with pytest.raises(ValueError, match="another optimize is writing to"):
            run_optimize(_spec(program="rta"), out)
    assert lm._engine_spec.calls == [] and built == []
    assert not (out / "spec.json").exists()


def test_4_5_each_kind_refuses_the_others_folder_by_name(lm, tmp_path):
    evaluated = tmp_path / "E"
    run_evaluation(_plain(), evaluated)
    with pytest.raises(ValueError, match=r"holds an evaluation run \(treeqa evaluate\), and this is an optimize run"):
        run_optimize(_spec(), evaluated)
    optimized = tmp_path / "O"
    run_optimize(_spec(), optimized)
    with pytest.raises(ValueError, match=r"holds an optimize run \(treeqa optimize\), and this is an evaluation"):
        run_evaluation(_plain(), optimized)


def test_5_a_compiled_side_is_neither_resumed_as_nor_adopted_as_a_zero_shot_run(lm, tmp_path):
    out = tmp_path / "O"
    run_optimize(_spec(), out)
    compiled_spec = json.loads((out / "compiled" / "spec.json").read_text())
    assert compiled_spec["side"] == "compiled"
    assert json.loads((out / "zero-shot" / "spec.json").read_text())["side"] == "zero-shot"
    calls = len(lm._engine_spec.calls)
    with pytest.raises(ValueError, match="holds the compiled side of an optimize run"):
        run_evaluation(_plain(), out / "compiled")
    with pytest.raises(ValueError, match="compiled side of an optimize run, not a zero-shot run"):
        run_optimize(_spec(zero_shot_from=str(out / "compiled")), tmp_path / "O2")
    assert len(lm._engine_spec.calls) == calls


def test_5_an_optimize_folder_written_before_sides_were_recorded_still_resumes(lm, tmp_path):
    out = tmp_path / "O"
    run_optimize(_spec(), out)
    old_key = _plain().key()  # what both sides' specs and records carried then
    for side in ("compiled", "zero-shot"):
        spec_file = out / side / "spec.json"
        spec_file.write_text(json.dumps({k: v for k, v in json.loads(spec_file.read_text()).items() if k != "side"}))
        records = out / side / "predictions.jsonl"
        lines = [json.loads(line) for line in records.read_text().splitlines()]
        records.write_text("".join(json.dumps({**r, "run": old_key}) + "\n" for r in lines))
    with pytest.raises(ValueError, match="holds the compiled side of an optimize run"):
        run_evaluation(_plain(), out / "compiled")  # told apart by its place, before the spec names it
    calls = len(lm._engine_spec.calls)
    report = run_optimize(_spec(), out)["report"]
    assert len(lm._engine_spec.calls) == calls  # resumed: nothing asked again
    assert report["compiled"]["n"] == 2 and report["zero_shot"]["n"] == 2
    assert json.loads((out / "compiled" / "spec.json").read_text())["side"] == "compiled"


def _torn_gzip(run_dir):
    """Compress a run's records, then cut the file short (a copy that stopped halfway)."""
    import gzip

    plain = run_dir / "predictions.jsonl"
    data = gzip.compress(plain.read_bytes() * 50)
    (run_dir / "predictions.jsonl.gz").write_bytes(data[: len(data) // 2])
    plain.unlink()


def test_9_zero_shot_from_torn_compressed_records_is_refused_before_the_compile(lm, tmp_path):
    reference = tmp_path / "reference"
    run_evaluation(_plain(), reference)
    _torn_gzip(reference)
    calls = len(lm._engine_spec.calls)
    with pytest.raises(ValueError, match="predictions.jsonl.gz is cut short or corrupt"):
        run_optimize(_spec(zero_shot_from=str(reference)), tmp_path / "O")
    assert len(lm._engine_spec.calls) == calls and not (tmp_path / "O").exists()


def test_9_an_adoptions_copy_is_whole_or_absent(lm, tmp_path):
    from treeqa.evaluation.records import copy_records

    reference = tmp_path / "reference"
    run_evaluation(_plain(), reference)
    _torn_gzip(reference)
    target = tmp_path / "zero-shot"
    target.mkdir()
    with pytest.raises(ValueError, match="cut short or corrupt"):
        copy_records(reference, target)
    assert list(target.iterdir()) == []  # no half copy a rerun would take for the adopted run
