"""The trained reader's calibrated yes/no: a written "yes" or "no" is decided by the reader's own
P("yes") with the dataset's bias, any other answer (and a reply without probabilities) is kept,
and the calibration travels in the compiled file, on the embedded model and on an endpoint."""

import json

import dspy
import pytest

from tests.fakes.lm import scripted_lm
from treeqa.evaluation.loop import run_example
from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledProgramError, load_program, save_compiled
from treeqa.programs.compiled.adapters import ServedYesNoCalibratedPredict, TrainedPromptPredict
from treeqa.programs.compiled.yes_no import YesNoCalibratedPredict, calibrate_yes_no, yes_no_record


def _ask(program, reply):
    lm, engine = scripted_lm(lambda kind, inputs: reply)
    with dspy.context(lm=lm):
        return program(question="Are A and B of the same nationality?"), engine


@pytest.mark.parametrize(("written", "p_yes", "bias", "answer"), [
    ("no", 0.4, 1.0, "yes"),   # log-odds -0.41, +1 -> yes
    ("no", 0.4, 0.0, "no"),
    ("yes", 0.7, -1.0, "no"),  # log-odds 0.85, -1 -> no
    ("Yes", 0.7, 0.0, "yes"),
])
def test_a_written_yes_or_no_follows_the_readers_probability_with_the_bias(written, p_yes, bias, answer):
    program = build_program("direct")
    calibrate_yes_no(program, ["answer"], bias)
    pred, _ = _ask(program, {"answer": written, "_p_yes": p_yes})
    assert pred.answer == answer


def test_other_answers_and_replies_without_probabilities_are_kept():
    program = build_program("direct")
    calibrate_yes_no(program, ["answer"], 5.0)
    assert _ask(program, {"answer": "Paris", "_p_yes": 0.9})[0].answer == "Paris"
    assert _ask(program, {"answer": "no"})[0].answer == "no"  # no log-probabilities: what it wrote


def test_a_reader_without_a_calibration_is_not_asked_for_probabilities():
    program = build_program("direct")
    assert _ask(program, {"answer": "no", "_p_yes": 0.99})[0].answer == "no"
    assert yes_no_record(program) is None


def test_the_calibration_is_saved_and_loaded_with_the_compiled_file(tmp_path):
    program = build_program("direct")
    calibrate_yes_no(program, ["answer"], 0.75)
    program.yes_no_fit = {"dataset": "2wikimultihopqa", "reads": 12}
    path = save_compiled(program, tmp_path / "c.json", name="direct", dataset="2wikimultihopqa", retriever="dense")
    record = json.loads(path.read_text())["treeqa"]["yes_no"]
    assert record == {"bias": 0.75, "predictors": ["answer"], "dataset": "2wikimultihopqa", "reads": 12}
    loaded = load_program(path)
    assert isinstance(loaded.answer, YesNoCalibratedPredict) and loaded.answer.yes_no_bias == 0.75
    assert _ask(loaded, {"answer": "no", "_p_yes": 0.4})[0].answer == "yes"


@pytest.mark.parametrize(("edit", "match"), [
    (lambda r: r.update(bias="high"), "ValueError"),
    (lambda r: r.update(predictors="answer"), "a list of predictors"),
    (lambda r: r.update(predictors=["nowhere"]), "no predictor named nowhere"),
    (lambda r: r.pop("bias"), "KeyError"),
])
def test_a_calibration_record_that_is_not_one_is_named(tmp_path, edit, match):
    program = build_program("direct")
    calibrate_yes_no(program, ["answer"], 0.5)
    path = save_compiled(program, tmp_path / "c.json", name="direct", dataset="hotpotqa", retriever="dense")
    state = json.loads(path.read_text())
    edit(state["treeqa"]["yes_no"])
    path.write_text(json.dumps(state))
    with pytest.raises(CompiledProgramError, match=f"yes_no calibration is not usable.*{match}"):
        load_program(path)


def test_a_served_reader_keeps_its_trained_prompt_and_its_calibration():
    program = build_program("direct")
    program.answer.__class__ = TrainedPromptPredict  # as serve_adapters_from leaves it
    calibrate_yes_no(program, ["answer"], -0.5)
    assert isinstance(program.answer, ServedYesNoCalibratedPredict)
    assert isinstance(program.answer, TrainedPromptPredict) and program.answer.yes_no_bias == -0.5


def test_an_evaluation_record_keeps_the_decision_and_what_was_written():
    program = build_program("direct")
    calibrate_yes_no(program, ["answer"], 1.0)
    lm, _ = scripted_lm(lambda kind, inputs: {"answer": "no", "_p_yes": 0.4})
    example = dspy.Example(id="q1", question="Are A and B of the same nationality?",
                           answers=["yes"]).with_inputs("question")
    record = run_example(program, example, lm=lm)
    assert record["prediction"] == "yes" and record["em"] == 1.0
    assert record["yes_no_calibration"] == [{"written": "no", "p_yes": 0.4, "bias": 1.0, "answer": "yes"}]
    uncalibrated = run_example(build_program("direct"), example, lm=lm)
    assert "yes_no_calibration" not in uncalibrated and uncalibrated["prediction"] == "no"


class _HandsItsReaderBack(dspy.Module):
    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict("question -> answer")

    def forward(self, question):
        return self.answer(question=question)  # the reader's own prediction, ending two modules


def test_a_decision_handed_back_by_the_program_is_recorded_once():
    program = _HandsItsReaderBack()
    calibrate_yes_no(program, ["answer"], 1.0)
    lm, _ = scripted_lm(lambda kind, inputs: {"answer": "no", "_p_yes": 0.4})
    example = dspy.Example(id="q1", question="Is A older than B?", answers=["yes"]).with_inputs("question")
    record = run_example(program, example, lm=lm)
    assert record["prediction"] == "yes" and len(record["yes_no_calibration"]) == 1
