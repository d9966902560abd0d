import json

import dspy
import pytest
from dspy.utils import DummyLM

from treeqa.data.corpus import Passage
from treeqa.evaluation import evaluate, read_records, summarize


class EchoProgram(dspy.Module):
    """Answers through one Predict; 'explode' raises; reports a fixed retrieval list."""

    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict("question -> answer")
        self.seen = []

    def forward(self, question):
        self.seen.append(question)
        if "explode" in question:
            raise RuntimeError("boom")
        pred = self.answer(question=question)
        return dspy.Prediction(answer=pred.answer, retrieved=[Passage("1", "Paris", "x"), Passage("2", "Lyon", "y")],
                               failures=[])


def _examples():
    return [
        dspy.Example(id="a", question="capital of France", answers=["Paris"], gold_titles=["Paris", "Nice"]).with_inputs("question"),
        dspy.Example(id="b", question="explode please", answers=["x"]).with_inputs("question"),
        dspy.Example(id="c", question="capital of Italy", answers=["Rome"]).with_inputs("question"),
    ]


def test_scores_records_errors_and_resumes(tmp_path):
    out = tmp_path / "preds.jsonl"
    lm = DummyLM({"France": {"answer": "Paris"}, "Italy": {"answer": "Milan"}})
    program = EchoProgram()
    result = evaluate(program, _examples(), lm=lm, out_path=out, progress=False)
    a, b, c = result["records"]
    assert (a["em"], c["em"]) == (1.0, 0.0)
    assert a["recall@15"] == 0.5 and "recall@15" not in c
    assert b["error"] == "RuntimeError: boom" and b["em"] == 0.0
    assert a["lm_calls"] == 1
    s = result["summary"]
    assert s["n"] == 3 and s["em"] == pytest.approx(33.33) and s["errors"] == 1
    assert [r["id"] for r in read_records(out)] == ["a", "b", "c"]

    # a second run over the same file redoes nothing
    again = EchoProgram()
    result2 = evaluate(again, _examples(), lm=lm, out_path=out, progress=False)
    assert again.seen == []
    assert result2["summary"] == s


def test_resume_after_torn_write(tmp_path):
    out = tmp_path / "preds.jsonl"
    first = {"id": "a", "em": 1.0, "f1": 1.0}
    out.write_text(json.dumps(first) + "\n" + '{"id": "c", "em"')  # killed mid-line
    program = EchoProgram()
    lm = DummyLM({"France": {"answer": "Paris"}, "Italy": {"answer": "Rome"}})
    result = evaluate(program, _examples(), lm=lm, out_path=out, progress=False)
    assert program.seen == ["explode please", "capital of Italy"]
    assert [r["id"] for r in result["records"]] == ["a", "b", "c"]
    assert sorted(r["id"] for r in read_records(out)) == ["a", "b", "c"]


def test_summarize_empty():
    assert summarize([]) == {"n": 0}


def test_parse_attempts_and_failures_are_recorded():
    lm = DummyLM([{"reply": "not the field asked for"}, {"reply": "still not"}, {"answer": "Rome"}])
    program = EchoProgram()
    ex = _examples()
    result = evaluate(program, [ex[2], ex[0]], lm=lm, progress=False)
    italy, france = result["records"]
    assert italy["error"].startswith("AdapterParseError")  # chat parse and the JSON retry both failed
    (name,) = italy["parse_attempts"]
    assert italy["parse_attempts"][name] == 2 and italy["parse_failures"][name] == 2
    assert france["parse_attempts"][name] == 1 and france["parse_failures"] == {}
    assert result["summary"]["parse_success"] == pytest.approx(100 / 3, abs=0.01)
