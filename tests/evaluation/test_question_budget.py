"""The per-question time limit with questions run in parallel (`evaluate(threads=2)`)."""

import threading
import time

import dspy
import pytest

from treeqa.evaluation.loop import RunAborted, evaluate, over_budget
from treeqa.evaluation.records import read_records

BUDGET = 1.5  # seconds; the quick questions take milliseconds, even on a loaded machine


class HeldProgram(dspy.Module):
    """Answers 'Paris' at once; a question containing 'slow' waits until `release` is set (at most 30 s),
    one containing 'explode' raises."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def forward(self, question):
        if "explode" in question:
            raise RuntimeError("boom")
        if "slow" in question:
            self.release.wait(30)
        return dspy.Prediction(answer="Paris", failures=[])


def _examples(*questions: str) -> list[dspy.Example]:
    return [dspy.Example(id=f"q{i}", question=q, answers=["Paris"]).with_inputs("question")
            for i, q in enumerate(questions)]


def _late_run_finishes(program: HeldProgram, example_id: str) -> None:
    """Let the held question go, and wait for its thread (its late record must be dropped)."""
    program.release.set()
    for thread in threading.enumerate():
        if thread.name == f"treeqa-question-{example_id}":
            thread.join(10)


def test_a_question_past_its_budget_with_two_threads_is_recorded_as_over_budget_and_the_others_go_on(tmp_path):
    out = tmp_path / "preds.jsonl"
    examples = _examples("fast one", "slow one", "fast two", "fast three", "fast four")
    program = HeldProgram()
    started = time.monotonic()
    try:
        result = evaluate(program, examples, out_path=out, threads=2, progress=False, run_key="k",
                          question_budget=BUDGET)
        took = time.monotonic() - started
    finally:
        _late_run_finishes(program, "q1")
    records = {r["id"]: r for r in result["records"]}
    assert records["q1"] == {**over_budget(examples[1], BUDGET), "run": "k"}
    assert records["q1"]["error"] == "TimeoutError: the question ran past its 1.5 s budget"
    for i in (0, 2, 3, 4):
        assert records[f"q{i}"]["em"] == 1.0 and "error" not in records[f"q{i}"]
    assert [r["id"] for r in result["records"]] == [ex.id for ex in examples]
    assert result["summary"]["n"] == 5 and result["summary"]["errors"] == 1
    assert took < 10  # not held until the slow question was let go (at most 30 s)
    on_disk = read_records(out)  # one line a question: the late run's own record was dropped
    assert sorted(r["id"] for r in on_disk) == ["q0", "q1", "q2", "q3", "q4"]
    assert next(r for r in on_disk if r["id"] == "q1") == records["q1"]

    # a resume skips them all; --retry-failed runs the over-budget one again, within its budget now
    again = HeldProgram()
    again.release.set()
    retried = evaluate(again, examples, out_path=out, threads=2, progress=False, run_key="k",
                       question_budget=BUDGET, retry_failed=True)
    assert retried["summary"]["errors"] == 0 and retried["records"][1]["em"] == 1.0
    assert sorted(r["id"] for r in read_records(out)) == ["q0", "q1", "q2", "q3", "q4"]


def test_with_two_threads_and_no_budget_every_question_is_recorded(tmp_path):
    program = HeldProgram()
    program.release.set()
    result = evaluate(program, _examples("slow a", "b", "explode c"), out_path=tmp_path / "p.jsonl", threads=2,
                      progress=False)
    assert [r["em"] for r in result["records"]] == [1.0, 1.0, 0.0]
    assert result["records"][2]["error"] == "RuntimeError: boom"
    assert sorted(r["id"] for r in read_records(tmp_path / "p.jsonl")) == ["q0", "q1", "q2"]


def test_with_two_threads_questions_whose_calls_all_fail_stop_the_run_and_keep_their_records(tmp_path):
    out = tmp_path / "preds.jsonl"
    with pytest.raises(RunAborted, match="2 questions in a row"):
        evaluate(HeldProgram(), _examples(*(f"explode {i}" for i in range(6))), out_path=out, threads=2,
                 progress=False, max_errors=2, question_budget=5)
    assert len(read_records(out)) == 2


class ContextReader(dspy.Module):
    """Answers with what the caller's `dspy.context` set (`answer_from`), as the thread sees it."""

    def forward(self, question):
        return dspy.Prediction(answer=dspy.settings.get("answer_from") or "nothing", failures=[])


def test_questions_in_threads_see_the_callers_dspy_context(tmp_path):
    """Settings the caller put in `dspy.context` (callbacks, a trace, ...) reach the questions'
    threads, as they reach the questions run in the caller's own thread."""
    examples = [dspy.Example(id=f"q{i}", question="q", answers=["Paris"]).with_inputs("question") for i in range(3)]
    with dspy.context(answer_from="Paris"):
        result = evaluate(ContextReader(), examples, out_path=tmp_path / "preds.jsonl", threads=2, progress=False)
    assert [r["prediction"] for r in result["records"]] == ["Paris"] * 3
