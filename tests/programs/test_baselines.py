"""The baselines share BeamSearchQA's interface: constructor(hyperparameters, retriever),
forward(question) -> answer, failures (and retrieved when they retrieve)."""


import json
from pathlib import Path

import dspy
import pytest

from tests.fakes import FakeRetriever, run_scripted
from treeqa.programs.baselines import ChainOfThoughtAnswer, ClosedBookAnswer, DirectAnswer, GenRead, RetrieveThenAnswer
from treeqa.programs.compiled import load_program

COMPILED = Path(__file__).parents[1] / "fixtures" / "compiled"  # written before direct and cot shared a base


def replies(kind, inputs):
    return {
        "answer": {"answer": " Paris "},
        "reasoning": {"reasoning": "The capital of France is Paris.", "answer": "Paris"},
        "document": {"document": "Paris is the capital of France."},
    }[kind]


def run(program, respond=replies, question="What is the capital of France?"):
    return run_scripted(program, respond, question)


def test_direct_answer_is_one_call_without_history():
    pred, engine = run(DirectAnswer())
    assert pred.answer == "Paris" and pred.failures == [] and "retrieved" not in pred
    assert engine.kinds() == ["answer"] and engine.calls[0].inputs["history"] == "(none yet)"


def test_chain_of_thought_reasons_then_answers_in_one_call():
    pred, engine = run(ChainOfThoughtAnswer())
    assert pred.answer == "Paris" and pred.reasoning.startswith("The capital")
    assert engine.kinds() == ["reasoning"]


def test_retrieve_then_answer_reads_the_top_k():
    retriever = FakeRetriever()
    pred, engine = run(RetrieveThenAnswer(retriever, k=3))
    assert retriever.asked == ["What is the capital of France?"]
    assert [p.id for p in pred.retrieved] == [f"What is the capital of France?|{i}" for i in range(3)]
    shown = engine.calls[0].inputs["passages"]
    assert len(shown) == 3 and shown[0].startswith("What is the capital of France? title 0: text 0")
    assert engine.kinds() == ["answer"] and pred.answer == "Paris"


def test_reasoning_rta_answers_in_one_call_when_its_reasoning_parses():
    pred, engine = run(RetrieveThenAnswer(FakeRetriever(), k=2, reason=True))
    assert engine.kinds() == ["reasoning"] and pred.answer == "Paris" and pred.failures == []


def test_a_reasoning_that_finds_no_answer_is_recorded_and_the_bare_reader_answers():
    def respond(kind, inputs):  # the reasoning ran past its token budget: its reply does not parse
        return ValueError("failed to parse the LM response") if kind == "reasoning" else replies(kind, inputs)

    pred, engine = run(RetrieveThenAnswer(FakeRetriever(), k=2, reason=True), respond)
    assert engine.kinds() == ["reasoning", "answer"] and pred.answer == "Paris"
    assert engine.calls[1].inputs["passages"] == engine.calls[0].inputs["passages"]
    assert [f["where"] for f in pred.failures] == ["answer"] and "parse" in pred.failures[0]["message"]


def test_reasoning_rta_with_both_readers_failing_has_no_answer_within_its_call_bound():
    program = RetrieveThenAnswer(FakeRetriever(), k=2, reason=True)
    pred, engine = run(program, lambda kind, inputs: TimeoutError("timed out"))
    assert pred.answer == "" and [f["where"] for f in pred.failures] == ["answer", "bare"]
    assert len(engine.calls) == RetrieveThenAnswer.call_bound(program.settings) == 2
    assert RetrieveThenAnswer.call_bound(RetrieveThenAnswer(FakeRetriever()).settings) == 1


def test_a_reasoning_rta_saved_before_it_had_the_bare_reader_still_loads(tmp_path):
    program = RetrieveThenAnswer(FakeRetriever(), k=2, reason=True)
    program.answer.demos = [dspy.Example(question="q", passages=["T: t"], reasoning="T says so.", answer="DEMO")]
    program.save(str(tmp_path / "rta.json"))
    saved = json.loads((tmp_path / "rta.json").read_text())
    del saved["bare"]
    (tmp_path / "rta.json").write_text(json.dumps(saved))
    fresh = RetrieveThenAnswer(FakeRetriever(), k=2, reason=True)
    fresh.load(str(tmp_path / "rta.json"))
    assert fresh.answer.demos[0]["answer"] == "DEMO" and fresh.bare.demos == []
    assert {n for n, _ in RetrieveThenAnswer(FakeRetriever()).named_predictors()} == {"answer"}


def test_genread_answers_from_its_own_document():
    pred, engine = run(GenRead())
    assert engine.kinds() == ["document", "answer"]
    assert engine.calls[1].inputs["passages"] == ["Paris is the capital of France."]
    assert pred.document == "Paris is the capital of France." and pred.answer == "Paris"


def test_genread_still_answers_when_its_document_fails():
    def respond(kind, inputs):
        return RuntimeError("no document") if kind == "document" else replies(kind, inputs)

    pred, engine = run(GenRead(), respond)
    assert pred.answer == "Paris" and [f["where"] for f in pred.failures] == ["background"]
    assert engine.calls[1].inputs["passages"] == []


@pytest.mark.parametrize("program", [DirectAnswer(), ChainOfThoughtAnswer(), GenRead(),
                                     RetrieveThenAnswer(FakeRetriever(), k=2)])
def test_failed_calls_give_an_empty_answer_and_are_listed(program):
    pred, engine = run(program, lambda kind, inputs: TimeoutError("timed out"))
    assert pred.answer == ""
    assert len(pred.failures) == len(engine.calls) >= 1
    assert all("timed out" in f["message"] for f in pred.failures)


@pytest.mark.parametrize("program", [DirectAnswer(), ChainOfThoughtAnswer(), GenRead(),
                                     RetrieveThenAnswer(FakeRetriever())])
@pytest.mark.parametrize("question", ["", "  \n"])
def test_empty_question_is_an_error(program, question):
    with pytest.raises(ValueError, match="question is empty"):
        program(question=question)


def test_retrieve_then_answer_needs_a_retriever_and_a_positive_k():
    with pytest.raises(ValueError, match="needs a retriever"):
        RetrieveThenAnswer(None)
    with pytest.raises(ValueError, match="k must be"):
        RetrieveThenAnswer(FakeRetriever(), k=0)


def test_retriever_stays_out_of_saved_state_and_is_shared_by_copies(tmp_path):
    retriever = FakeRetriever()
    program = RetrieveThenAnswer(retriever, k=2)
    program.answer.demos = [dspy.Example(question="q", passages=["T: t"], answer="DEMO")]
    program.save(str(tmp_path / "rta.json"))
    fresh = RetrieveThenAnswer(FakeRetriever(), k=2)
    fresh.load(str(tmp_path / "rta.json"))
    assert fresh.answer.demos[0]["answer"] == "DEMO"
    assert program.deepcopy().retriever is retriever
    assert "Fake" not in (tmp_path / "rta.json").read_text()


@pytest.mark.parametrize("cls, names", [
    (DirectAnswer, {"answer"}),
    (ChainOfThoughtAnswer, {"answer.predict"}),
    (GenRead, {"background", "answer"}),
])
def test_predictor_names(cls, names):
    assert {n for n, _ in cls().named_predictors()} == names


@pytest.mark.parametrize("name, cls", [("direct", DirectAnswer), ("cot", ChainOfThoughtAnswer)])
def test_closed_book_programs_differ_in_their_predictor_and_load_files_compiled_before(name, cls):
    assert cls.__bases__ == (ClosedBookAnswer,) and not {"__init__", "forward"} & set(vars(cls))
    program = load_program(COMPILED / f"{name}.json", expect=name)
    ((_, predictor),) = program.named_predictors()
    assert predictor.demos[0]["answer"] == "Georges Bizet"
    assert predictor.signature.instructions == "Answer from what you know, in a few words."
    pred, engine = run(program)
    assert pred.answer == "Paris" and engine.kinds() == ["reasoning" if name == "cot" else "answer"]
    assert ("reasoning" in pred) == (name == "cot")
