"""A finished run's records kept compressed (`predictions.jsonl.gz`, as under benchmarks/runs) are
read wherever the plain file is (`records_file` finds a folder's); a run is never resumed into
such a folder, where appending would start a second file of records."""

import gzip
import importlib.util
import json
import logging
import shutil

import pytest

from tests.fakes import answering, review, review_kind, scripted_lm, tree_retriever, use_lm
from treeqa.evaluation.records import read_records, records_file
from treeqa.evaluation.repick import RepickError, repick_run
from treeqa.settings import PROJECT_ROOT


def _record(i: int, em: float = 1.0) -> dict:
    return {"id": f"q{i}", "question": f"question {i}", "prediction": "x", "em": em, "f1": em}


def _gzip(path):
    """`gzip -n` of `path`: the plain file replaced by `path.gz`."""
    packed = path.with_name(path.name + ".gz")
    with path.open("rb") as src, gzip.GzipFile(packed, "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return packed


def _script(name):
    spec = importlib.util.spec_from_file_location(f"{name}_script", PROJECT_ROOT / "benchmarks" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_read_records_reads_a_compressed_file_as_the_plain_one(tmp_path, caplog):
    plain = tmp_path / "predictions.jsonl"
    plain.write_text("\n".join([json.dumps(_record(1)), '{"id": "torn', json.dumps(_record(2, 0.0)),
                                json.dumps(_record(1, 0.0))]) + "\n")
    expected = read_records(plain)
    with caplog.at_level(logging.WARNING):
        assert read_records(_gzip(plain)) == expected == [_record(1, 0.0), _record(2, 0.0)]
    assert "predictions.jsonl.gz, line 2: skipped" in caplog.text  # a bad line is skipped as in the plain file

    cut = tmp_path / "cut" / "predictions.jsonl.gz"  # a compressed file cut short keeps what was read
    cut.parent.mkdir()
    whole = gzip.compress("".join(json.dumps(_record(i)) + "\n" for i in range(200)).encode(), mtime=0)
    cut.write_bytes(whole[: len(whole) // 2])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        records = read_records(cut)
    assert 0 < len(records) < 200 and "cut short or corrupt" in caplog.text


def test_records_file_is_the_plain_one_or_the_compressed_one_never_both(tmp_path):
    assert records_file(tmp_path) == tmp_path / "predictions.jsonl"  # neither yet: where a run writes
    (tmp_path / "predictions.jsonl").write_text(json.dumps(_record(1)) + "\n")
    assert records_file(tmp_path) == tmp_path / "predictions.jsonl"
    packed = _gzip(tmp_path / "predictions.jsonl")
    assert records_file(str(tmp_path)) == packed
    (tmp_path / "predictions.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds both predictions.jsonl and predictions.jsonl.gz"):
        records_file(tmp_path)


def test_a_compressed_run_is_read_by_view_replay_and_the_benchmark_scripts(fixture_data, tmp_path, monkeypatch,
                                                                          capsys):
    from treeqa.evaluation.replay import replay_run
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.programs.compiled import save_compiled
    from treeqa.programs.tree_of_reviews import TreeOfReviews
    from treeqa.serving.view import load_run

    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: searcher)
    lm, engine = scripted_lm(answering(lambda call: review("accept", analysis="enough"), answer="Paris"),
                             classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    compiled = save_compiled(TreeOfReviews(retriever=tree_retriever(), widths=(2, 2)), tmp_path / "tor.json",
                             name="tor", dataset="hotpotqa", retriever="dense")
    run_evaluation(EvalSpec(program="tor", n=2, params={"widths": [2, 2]}), tmp_path / "run")
    plain = read_records(tmp_path / "run" / "predictions.jsonl")
    view = load_run(tmp_path / "run")
    _gzip(tmp_path / "run" / "predictions.jsonl")

    assert load_run(tmp_path / "run") == view and len(view["runs"]["run"]) == 2  # the page
    searcher.passages = [p for made in searcher._made.values() for p in made]
    before = len(engine.calls)
    result, replayed, _ = replay_run(tmp_path / "run", compiled, out=tmp_path / "replay")  # the recorded trees
    assert replayed == 2 and engine.kinds()[before:] == ["fuse", "fuse"]
    assert [r["id"] for r in result["records"]] == [r["id"] for r in plain]

    record = _script("record")  # a YAML entry and a pair from compressed records
    assert record._entry(tmp_path / "run")["figures"]["n"] == 2
    assert record._pairs([tmp_path / "run", tmp_path / "replay"], ["run:replay"])["run vs replay"]["em"]["diff"] == 0
    reproduce = _script("reproduce")
    assert reproduce.records(tmp_path / "run") == {r["id"]: r for r in plain}
    assert reproduce.main(str(tmp_path / "run"), str(tmp_path / "run")) == 0
    capsys.readouterr()


def test_resuming_into_compressed_records_is_refused_saying_how(fixture_data, tmp_path, monkeypatch):
    """Appending beside `predictions.jsonl.gz` would start a second file that every reader then
    refuses (or, before, a run that asked its questions again): refused, before anything is
    written, with the one line that says how to resume."""
    from dspy.utils import DummyLM

    from treeqa.evaluation.loop import evaluate
    from treeqa.evaluation.runs import EvalSpec, run_evaluation

    use_lm(monkeypatch, DummyLM({"Rigi": {"answer": "Lake Zurich"}, "Weggis": {"answer": "no"}}))
    spec = EvalSpec(program="direct", n=2)
    run = tmp_path / "run"
    run_evaluation(spec, run)
    (run / "summary.json").unlink()
    packed = _gzip(run / "predictions.jsonl")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".lock"}
    for attempt in (lambda: run_evaluation(spec, run), lambda: run_evaluation(spec, run, retry_failed=True),
                    lambda: evaluate(None, [], out_path=run / "predictions.jsonl", progress=False)):
        with pytest.raises(ValueError) as refused:
            attempt()
        assert str(refused.value) == (f"{packed} holds this run's records compressed: to resume the run, "
                                      f"decompress them first (gunzip {packed})")
        assert {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".lock"} == before

    with gzip.open(packed, "rb") as src, (run / "predictions.jsonl").open("wb") as dst:  # what it says
        shutil.copyfileobj(src, dst)
    packed.unlink()
    result = run_evaluation(spec, run)  # resumed: nothing left to ask
    assert result["summary"]["n"] == 2 and len((run / "predictions.jsonl").read_text().splitlines()) == 2


def test_a_compressed_run_is_adopted_decompressed(fixture_data, tmp_path, monkeypatch):
    """optimize's zero-shot side starts from a reference run: from a compressed one too, as the
    plain file it then appends to."""
    from dspy.utils import DummyLM

    from treeqa.evaluation.runs import EvalSpec, adopt_run, run_evaluation

    lm = use_lm(monkeypatch, DummyLM({"Rigi": {"answer": "Lake Zurich"}, "Weggis": {"answer": "no"}}))
    spec = EvalSpec(program="direct", n=2)
    run_evaluation(spec, tmp_path / "reference")
    plain = (tmp_path / "reference" / "predictions.jsonl").read_bytes()
    _gzip(tmp_path / "reference" / "predictions.jsonl")
    adopt_run(tmp_path / "reference", tmp_path / "zero-shot", spec)
    assert (tmp_path / "zero-shot" / "predictions.jsonl").read_bytes() == plain
    calls = len(lm.history)
    assert run_evaluation(spec, tmp_path / "zero-shot")["summary"]["n"] == 2 and len(lm.history) == calls

    beam = tmp_path / "beam"  # repick: a folder holding compressed records is not a new folder to write into
    beam.mkdir()
    (beam / "spec.json").write_text(json.dumps({"program": "beam"}))
    (beam / "predictions.jsonl").write_text(json.dumps(_record(1)) + "\n")
    with pytest.raises(RepickError, match="already holds records"):
        repick_run(beam, tmp_path / "reference", "vote", "treeqa repick")
