"""`treeqa repick`: a beam run's answers re-picked from its trees are the answers a run with the
other pick gives, because `pick` never changes the search."""

import json

import dspy
import pytest

from tests.fakes import BeamScript, FakeRetriever, run_cli, scripted_lm
from treeqa.evaluation.loop import run_example
from treeqa.evaluation.repick import RepickError, repick_run, repicked
from treeqa.programs.beam_search import BeamSearchQA

QUESTION = "QQ"
CONF = {"root": 0.4, QUESTION: 0.3, "root1": 0.7, "root2": 0.5, "QQ1": 0.1, "QQ2": 0.2}
ANSWERS = {"root": "Paris", QUESTION: "paris.", "root2": "The Paris", "QQ2": "Lyon"}


def _record(pick, gold):
    program = BeamSearchQA(FakeRetriever(), max_queries=2, depth=1, beam_size=1, threshold=0.9, pick=pick)
    lm, _ = scripted_lm(BeamScript(CONF, answers=ANSWERS))
    example = dspy.Example(id="q1", question=QUESTION, answers=gold).with_inputs("question")
    return run_example(program, example, lm=lm)


@pytest.mark.parametrize("gold", [["Paris"], ["ans:root1"]])
def test_a_repicked_record_is_the_record_of_a_run_with_that_pick(gold):
    paper, vote = _record("beam", gold), _record("vote", gold)
    assert paper["prediction"] == "ans:root1" and vote["prediction"] == "The Paris"
    again = repicked(paper, "vote")
    for key in ("prediction", "em", "f1", "tree"):
        assert again[key] == vote[key], key
    assert again["em"] == (gold == ["Paris"])
    assert repicked(vote, "beam")["prediction"] == "ans:root1"  # and back


def _beam_run(tmp_path):
    run = tmp_path / "beam"
    run.mkdir()
    records = [_record("beam", ["Paris"]), {"id": "q2", "question": "x", "answers": ["y"], "prediction": "",
                                            "em": 0.0, "f1": 0.0, "error": "RuntimeError: no LM"}]
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "spec.json").write_text(json.dumps({"program": "beam", "dataset": "webq", "params": {}}))
    (run / "summary.json").write_text(json.dumps({"data": {"webq": "test"}}))
    return run


def test_the_command_writes_a_folder_that_record_and_decisions_read(tmp_path):
    run = _beam_run(tmp_path)
    result = run_cli("repick", str(run), str(tmp_path / "vote"))
    assert result.exit_code == 0, result.output
    assert "2 records, 1 answers changed; EM 0.0 -> 50.0" in result.output
    spec = json.loads((tmp_path / "vote" / "spec.json").read_text())
    assert spec["params"] == {"pick": "vote", "_repicked_from": str(run)}
    summary = json.loads((tmp_path / "vote" / "summary.json").read_text())
    assert summary["summary"]["em"] == 50.0 and summary["data"] == {"webq": "test"}
    assert summary["command"] == f"treeqa repick {run} {tmp_path / 'vote'} --pick vote"


def test_the_command_refuses_a_folder_with_records_and_a_run_of_another_program(tmp_path):
    run = _beam_run(tmp_path)
    repick_run(run, tmp_path / "vote", "vote", "treeqa repick")
    again = run_cli("repick", str(run), str(tmp_path / "vote"))
    assert again.exit_code == 1 and "already holds records" in again.output
    (run / "spec.json").write_text(json.dumps({"program": "tor"}))
    other = run_cli("repick", str(run), str(tmp_path / "other"))
    assert other.exit_code == 1 and "only beam runs have a pick" in other.output
    with pytest.raises(RepickError, match="no spec.json"):
        repick_run(tmp_path / "nowhere", tmp_path / "x", "vote", "treeqa repick")


def test_a_replay_is_refused_because_only_its_best_state_was_read_again(tmp_path):
    run = _beam_run(tmp_path)
    (run / "spec.json").write_text(json.dumps({"program": "beam", "dataset": "webq",
                                               "params": {"_replay_of": "beam-run", "reading": "passages"}}))
    result = run_cli("repick", str(run), str(tmp_path / "vote"))
    assert result.exit_code == 1 and "a replay" in result.output and "re-pick the recorded run" in result.output
    assert not (tmp_path / "vote" / "predictions.jsonl").exists()


def test_a_judged_beam_that_read_only_its_answer_keeps_its_pick_and_cannot_vote():
    """Under a path judge with pick=beam only the state that answers is read (the others' answers are
    null); where the best one's reading failed, the next of the last beam answered."""
    record = _record("beam", ["Paris"])
    tree = record["tree"]
    first, second = tree["beams"][-1][0], tree["states"][0]["id"]
    tree["beams"][-1] = [first, second]
    for state in tree["states"]:
        state["answer"] = None if state["id"] != second else "Paris"
    tree["states"][first]["status"] = "failed"  # its reading failed: the next state answered
    record = {**record, "prediction": "Paris", "em": 1.0, "f1": 1.0, "tree": {**tree, "best": second}}
    assert repicked(record, "beam")["prediction"] == "Paris" and repicked(record, "beam")["tree"]["best"] == second
    with pytest.raises(RepickError, match="a vote needs every state's answer"):
        repicked(record, "vote")


def test_a_folder_of_the_users_is_never_written_over(tmp_path):
    """Fifth round: `repick RUN DIR` replaced DIR's own spec.json and summary.json; a folder that
    holds anything, or a file in its place, is refused and left as it was."""
    run = _beam_run(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text("my notes")
    refused = run_cli("repick", str(run), str(mine))
    assert refused.exit_code == 1 and "already holds files" in refused.output
    assert [p.name for p in mine.iterdir()] == ["summary.json"] and (mine / "summary.json").read_text() == "my notes"
    (tmp_path / "a-file").write_text("x")
    assert "is a file" in run_cli("repick", str(run), str(tmp_path / "a-file")).output
    (tmp_path / "empty").mkdir()
    assert run_cli("repick", str(run), str(tmp_path / "empty")).exit_code == 0
