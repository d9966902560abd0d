import json

import dspy
import pytest
from dspy.utils import DummyLM

from tests.fakes import FakeEndpoint, use_lm
from treeqa.data.corpus import Passage
from treeqa.evaluation.loop import evaluate
from treeqa.evaluation.records import read_records, summarize
from treeqa.evaluation.runs import EvalSpec, run_evaluation
from treeqa.lm import get_lm


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
        return dspy.Prediction(answer=pred.answer, retrieved=[Passage("1", "Paris", "x"),
                                                                  Passage("2", "Lyon", "Lyon lies south of Paris.")],
                               failures=[])


def _examples():
    return [
        dspy.Example(id="a", question="capital of France", answers=["Paris"],
                     gold_ids=["1", "3"]).with_inputs("question"),
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
    assert (a["answer_hit@15"], c["answer_hit@15"]) == (1.0, 0.0) and "answer_hit@15" not in b  # gold in a text
    assert b["error"] == "RuntimeError: boom" and b["em"] == 0.0
    assert a["lm_calls"] == 1
    s = result["summary"]
    assert s["n"] == 3 and s["em"] == pytest.approx(33.33) and s["errors"] == 1
    assert s["answer_hit@15"] == 50.0  # over the questions that retrieved
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


def test_unreadable_lines_are_skipped_with_file_and_line(tmp_path, caplog):
    out = tmp_path / "preds.jsonl"
    good = json.dumps({"id": "a", "em": 1.0, "f1": 1.0, "prediction": "Zürich"}, ensure_ascii=False).encode()
    out.write_bytes(good + b"\n" + b'{"id": "c", "prediction": "Z\xc3' + b"\n" + b'{"em": 1.0}\n' + b"[1, 2]\n")
    records = read_records(out)
    assert [r["id"] for r in records] == ["a"]
    for line in (2, 3, 4):
        assert f"preds.jsonl, line {line}: skipped" in caplog.text
    # the run resumes on top: a and only a is kept, b and c are run, nothing is duplicated
    lm = DummyLM({"France": {"answer": "Paris"}, "Italy": {"answer": "Rome"}})
    program = EchoProgram()
    evaluate(program, _examples(), lm=lm, out_path=out, progress=False)
    assert program.seen == ["explode please", "capital of Italy"]
    assert sorted(r["id"] for r in read_records(out)) == ["a", "b", "c"]


def test_records_of_another_run_are_refused(tmp_path):
    out = tmp_path / "preds.jsonl"
    lm = DummyLM({"France": {"answer": "Paris"}, "Italy": {"answer": "Rome"}})
    evaluate(EchoProgram(), _examples()[:1], lm=lm, out_path=out, progress=False, run_key="aaaa")
    assert read_records(out)[0]["run"] == "aaaa"
    with pytest.raises(ValueError, match="another run spec"):
        evaluate(EchoProgram(), _examples(), lm=lm, out_path=out, progress=False, run_key="bbbb")


def test_retry_failed_reruns_only_failed_questions_without_duplicates(tmp_path):
    out = tmp_path / "preds.jsonl"
    lm = DummyLM({"France": {"answer": "Paris"}, "Italy": {"answer": "Rome"}})
    evaluate(EchoProgram(), _examples(), lm=lm, out_path=out, progress=False)
    again = EchoProgram()
    result = evaluate(again, _examples(), lm=lm, out_path=out, progress=False)
    assert again.seen == []  # a plain resume never retries
    retry = EchoProgram()
    result = evaluate(retry, _examples(), lm=lm, out_path=out, progress=False, retry_failed=True)
    assert retry.seen == ["explode please"]
    lines = out.read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == ["a", "b", "c"]
    assert result["summary"]["errors"] == 1


def test_summarize_empty():
    assert summarize([]) == {"n": 0}


def test_recall_is_averaged_over_the_questions_that_have_gold_and_says_how_many():
    base = {"em": 0.0, "f1": 0.0, "lm_calls": 1, "seconds": 1.0}
    records = [{**base, "id": "a", "recall@15": 1.0}, {**base, "id": "b", "recall@15": 0.0}, {**base, "id": "c"}]
    summary = summarize(records)
    assert summary["recall@15"] == 50.0 and summary["recall@15_questions"] == 2
    assert "recall@15_questions" not in summarize(records[:2])  # every question counted: nothing to say


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


class WriteSubQuestion(dspy.Signature):
    question: str = dspy.InputField()
    sub_question: str = dspy.OutputField()


class AnswerWithSubQuestion(dspy.Signature):
    question: str = dspy.InputField()
    sub_question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class TwoStepProgram(dspy.Module):
    """Two predictors of different signatures, and one LM call made without an adapter."""

    def __init__(self):
        super().__init__()
        self.ask = dspy.Predict(WriteSubQuestion)
        self.answer = dspy.Predict(AnswerWithSubQuestion)

    def forward(self, question):
        sub = self.ask(question=question).sub_question
        dspy.settings.lm("a raw prompt")
        return dspy.Prediction(answer=self.answer(question=question, sub_question=sub).answer)


def test_lm_calls_and_seconds_are_put_down_to_the_predictor_that_made_them():
    lm = DummyLM([{"sub_question": "Which country?"}, {"answer": "unused"}, {"answer": "Paris"}])
    result = evaluate(TwoStepProgram(), _examples()[:1], lm=lm, progress=False)
    (record,) = result["records"]
    assert record["lm_calls_by_predictor"] == {"ask": 1, "other": 1, "answer": 1}
    assert set(record["lm_seconds_by_predictor"]) == set(record["lm_calls_by_predictor"])
    assert sum(record["lm_seconds_by_predictor"].values()) <= record["seconds"]
    assert set(result["summary"]["lm_seconds_per_q_by_predictor"]) == set(record["lm_calls_by_predictor"])
    assert "lm_seconds_per_q_by_predictor_questions" not in result["summary"]  # every record has them


def test_an_endpoint_call_in_its_worker_thread_is_put_down_to_its_predictor(settings_env):
    """EndpointLM runs each request in a thread of its own (its deadline): the predictor must
    follow the call there, and the wait the server makes is that predictor's time."""
    settings_env(lm_timeout=20, lm_retries=0)
    reply = "[[ ## sub_question ## ]]\nWhich country?\n\n[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"
    with FakeEndpoint(lambda n, body, headers: (200, reply, 0.2)) as ep:
        lm = get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        (record,) = evaluate(TwoStepProgram(), _examples()[:1], lm=lm, progress=False)["records"]
    assert record["lm_calls_by_predictor"] == {"ask": 1, "other": 1, "answer": 1}
    assert all(seconds >= 0.2 for seconds in record["lm_seconds_by_predictor"].values())


class Reasoner(dspy.Module):
    """A predictor nested in ChainOfThought, and one made on the fly that the program does not list."""

    def __init__(self):
        super().__init__()
        self.reason = dspy.ChainOfThought(AnswerWithSubQuestion)

    def forward(self, question):
        sub = dspy.Predict(WriteSubQuestion)(question=question).sub_question
        return self.reason(question=question, sub_question=sub)


def test_nested_predictors_go_by_their_path_and_unlisted_ones_by_their_signature():
    lm = DummyLM([{"sub_question": "Which country?"}, {"reasoning": "It is France.", "answer": "Paris"}])
    (record,) = evaluate(Reasoner(), _examples()[:1], lm=lm, progress=False)["records"]
    assert record["lm_calls_by_predictor"] == {"WriteSubQuestion": 1, "reason.predict": 1}


# benchmarks/faults.md, first round #4: gold answers that are numbers or normalise to nothing

def test_4_an_always_failing_lm_scores_zero_even_on_empty_golds(fixture_data, tmp_path, monkeypatch):
    lm = dspy.LM("local/dead", engine=type("Dead", (), {"complete": lambda self, r: (_ for _ in ()).throw(
        ConnectionError("down")), "close": lambda self: None})(), cache=False, num_retries=0)
    use_lm(monkeypatch, lm)
    data = tmp_path / "data" / "nq"
    data.mkdir(parents=True)
    (data / "NQ-open.test.jsonl").write_text('{"question": "q1", "answer": ["The"]}\n'
                                             '{"question": "q2", "answer": [1990]}\n'
                                             '{"question": "q3", "answer": ["x"]}\n')
    from treeqa.settings import get_settings

    monkeypatch.setenv("TREEQA_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    result = run_evaluation(EvalSpec(program="direct", dataset="nq", split="test", n=2), tmp_path / "R")
    assert result["summary"]["n"] == 2 and result["summary"]["em"] == 0.0  # "The" skipped, 1990 read as text
