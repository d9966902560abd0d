"""`benchmarks/repick.py`: a beam run's answers re-picked from its trees are the answers a run
with the other pick gives, because `pick` never changes the search."""

import importlib.util
import json

import dspy
import pytest

from tests.fakes import BeamScript, FakeRetriever, scripted_lm
from treeqa.evaluation.loop import run_example
from treeqa.programs.beam_search import BeamSearchQA
from treeqa.settings import PROJECT_ROOT

QUESTION = "QQ"
CONF = {"root": 0.4, QUESTION: 0.3, "root1": 0.7, "root2": 0.5, "QQ1": 0.1, "QQ2": 0.2}
ANSWERS = {"root": "Paris", QUESTION: "paris.", "root2": "The Paris", "QQ2": "Lyon"}


def _script():
    spec = importlib.util.spec_from_file_location("repick_script", PROJECT_ROOT / "benchmarks" / "repick.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _record(pick, gold):
    program = BeamSearchQA(FakeRetriever(), max_queries=2, depth=1, beam_size=1, threshold=0.9, pick=pick)
    lm, _ = scripted_lm(BeamScript(CONF, answers=ANSWERS))
    example = dspy.Example(id="q1", question=QUESTION, answers=gold).with_inputs("question")
    return run_example(program, example, lm=lm)


@pytest.mark.parametrize("gold", [["Paris"], ["ans:root1"]])
def test_a_repicked_record_is_the_record_of_a_run_with_that_pick(gold):
    paper, vote = _record("beam", gold), _record("vote", gold)
    assert paper["prediction"] == "ans:root1" and vote["prediction"] == "The Paris"
    again = _script().repicked(paper, "vote")
    for key in ("prediction", "em", "f1", "tree"):
        assert again[key] == vote[key], key
    assert again["em"] == (gold == ["Paris"])
    assert _script().repicked(vote, "beam")["prediction"] == "ans:root1"  # and back


def test_the_script_writes_a_folder_that_record_and_decisions_read(tmp_path, capsys):
    run = tmp_path / "beam"
    run.mkdir()
    records = [_record("beam", ["Paris"]), {"id": "q2", "question": "x", "answers": ["y"], "prediction": "",
                                            "em": 0.0, "f1": 0.0, "error": "RuntimeError: no LM"}]
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "spec.json").write_text(json.dumps({"program": "beam", "dataset": "webq", "params": {}}))
    (run / "summary.json").write_text(json.dumps({"data": {"webq": "test"}}))
    _script().main([str(run), str(tmp_path / "vote")])
    assert "2 records, 1 answers changed; EM 0.0 -> 50.0" in capsys.readouterr().out
    spec = json.loads((tmp_path / "vote" / "spec.json").read_text())
    assert spec["params"] == {"pick": "vote", "_repicked_from": str(run)}
    summary = json.loads((tmp_path / "vote" / "summary.json").read_text())
    assert summary["summary"]["em"] == 50.0 and summary["command"].startswith("python benchmarks/repick.py")
    with pytest.raises(SystemExit, match="already holds records"):
        _script().main([str(run), str(tmp_path / "vote")])
    (run / "spec.json").write_text(json.dumps({"program": "tor"}))
    with pytest.raises(SystemExit, match="only beam runs have a pick"):
        _script().main([str(run), str(tmp_path / "other")])
