"""Where a question's seconds go: `lm_seconds` counts every embedded engine the question used, the
run's and a predictor's own (a reader's adapter runs on an engine of its own), so `overhead_pct` is
what lies outside the LM (retrieval, the judge, parsing), not the reader's calls."""

import dspy

from tests.fakes.lm import ScriptedEngine
from treeqa.evaluation.loop import run_example
from treeqa.evaluation.records import summarize
from treeqa.lm._engine import EngineStats


class TimedEngine(ScriptedEngine):
    """A scripted engine with the embedded engine's call clock: each call counts `seconds`."""

    def __init__(self, answer: str, seconds: float):
        super().__init__(lambda call: {"answer": answer})
        self.stats, self.seconds = EngineStats(), seconds

    def complete(self, request):
        self.stats.seconds += self.seconds
        return super().complete(request)


class TwoReaders(dspy.Module):
    def __init__(self):
        super().__init__()
        self.draft = dspy.Predict("question -> answer")
        self.read = dspy.Predict("question -> answer")

    def forward(self, question):
        self.draft(question=question)
        return self.read(question=question)


def test_a_readers_own_engine_is_lm_time_not_overhead():
    program = TwoReaders()
    run_lm = dspy.LM("local/run", engine=TimedEngine("draft", 2.0), cache=False, num_retries=0)
    program.read.lm = dspy.LM("local/adapter", engine=TimedEngine("Paris", 30.0), cache=False, num_retries=0)
    example = dspy.Example(id="q1", question="Capital of France?", answers=["Paris"]).with_inputs("question")
    record = run_example(program, example, lm=run_lm, adapter=dspy.ChatAdapter())
    assert record["prediction"] == "Paris" and record["lm_seconds"] == 32.0
    record["seconds"] = 40.0  # the wall clock, fixed for the figure
    assert summarize([record])["overhead_pct"] == 20.0


def test_the_seconds_table_splits_a_question_by_predictor_and_outside_the_lm():
    from treeqa.evaluation.tables import seconds_table

    table = seconds_table({"tor": {"seconds_per_q": 35.0, "overhead_pct": 2.0, "prompt_tokens_per_q": 3000,
                                   "completion_tokens_per_q": 120,
                                   "lm_seconds_per_q_by_predictor": {"fuse": 13.3, "complete_paragraph": 21.0}},
                           "old": {"seconds_per_q": 7.0}})
    rows = table.splitlines()
    assert rows[2] == "| tor | 35.0 | complete_paragraph 21.0, fuse 13.3 | 0.7 s (2.0%) | 3000 / 120 |"
    assert rows[3] == "| old | 7.0 | – | – | – / – |"
