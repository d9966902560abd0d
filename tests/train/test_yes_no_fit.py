"""Fitting the trained reader's yes/no calibration: the bias puts the prior's share of the fitting
reads on "yes", a dataset gets one only with a prior and probabilities, and the fit answers a
built set's yes/no validation reads with log-probabilities, resumably."""

import json
import math

import dspy
import pytest

from tests.fakes import FakeRetriever
from tests.fakes.lm import scripted_lm
from treeqa.programs import build_program
from treeqa.train.reads import Take, write_rows
from treeqa.train.yes_no import MARGIN, fit_bias, fit_calibration, fit_reader_yes_no, training_yes_shares


@pytest.mark.parametrize(("share", "bias", "yes"), [(0.5, 0.0, 2), (0.25, -1.5, 1), (0.0, -2 - MARGIN, 0),
                                                    (1.0, 3 + MARGIN, 4), (0.6, 0.0, 2)])
def test_the_bias_says_yes_to_the_priors_share_of_the_reads(share, bias, yes):
    odds = [1.0, -3.0, 2.0, -1.0]
    assert fit_bias(odds, share) == pytest.approx(bias)
    assert sum(o + fit_bias(odds, share) >= 0 for o in odds) == yes
    with pytest.raises(ValueError, match="no yes/no read"):
        fit_bias([], 0.5)


def _rec(dataset, gold, said, p_yes):
    return {"dataset": dataset, "gold": gold, "said": said, "p_yes": p_yes, "failures": []}


def test_a_dataset_gets_a_bias_only_with_a_prior_and_probabilities():
    records = [_rec("2wiki", "yes", "no", 0.45), _rec("2wiki", "no", "no", 0.1), _rec("2wiki", "yes", "no", 0.3),
               _rec("2wiki", "no", "no", 0.05), _rec("2wiki", "no", "no", None), _rec("nq", "yes", "yes", 0.9),
               _rec("hotpotqa", "yes", "yes", None)]
    shares = {"2wiki": {"questions": 40, "yes": 20, "share": 0.5}, "hotpotqa": {"questions": 2, "yes": 1, "share": 0.5}}
    fit = fit_calibration(records, shares)
    assert set(fit) == {"2wiki"}  # nq: no prior; hotpotqa: no probability
    two = fit["2wiki"]
    assert (two["reads"], two["without_probability"], two["gold_yes"]) == (4, 1, 2)
    assert two["said_yes"] == {"written": 0, "calibrated": 2} and two["right"] == {"written": 2, "calibrated": 4}
    assert math.log(0.3 / 0.7) + two["bias"] >= 0 > math.log(0.1 / 0.9) + two["bias"]


def test_the_prior_is_the_share_of_yes_among_the_training_questions_yes_no(monkeypatch):
    questions = {"a": ["yes", "no", "no", "Paris", "No"], "b": ["Rome"]}
    monkeypatch.setattr("treeqa.train.yes_no.take_examples",
                        lambda take: [dspy.Example(answers=[a]) for a in questions[take.dataset]])
    assert training_yes_shares([Take("a", "train"), Take("b", "train")]) == {
        "a": {"questions": 4, "yes": 1, "share": 0.25}}


def _set(folder):
    rows = [{"id": f"q{i}:gold", "question_id": f"q{i}", "dataset": "d", "side": side, "kind": "gold",
             "question": f"Same country {i}?", "passages": ["p"], "answer": answer,
             "chat": {"messages": [{"role": "user", "content": "q"}]}}
            for i, (side, answer) in enumerate([("validation", "yes"), ("validation", "no"), ("validation", "Paris"),
                                                ("train", "yes"), ("validation", "no")])]
    return write_rows(rows, folder, {"takes": [{"dataset": "d", "split": "train", "without": [1, 2]}]}, {})


def test_the_fit_answers_the_yes_no_validation_reads_and_resumes(tmp_path, monkeypatch):
    _set(tmp_path / "reads")
    seen = []
    monkeypatch.setattr("treeqa.train.yes_no.training_yes_shares",
                        lambda takes: seen.append(takes) or {"d": {"questions": 3, "yes": 1, "share": 0.34}})
    p = {"Same country 0?": 0.6, "Same country 1?": 0.2, "Same country 4?": 0.3}
    lm, engine = scripted_lm(lambda kind, inputs: {"answer": "no", "_p_yes": p[inputs["question"]]})
    reader = build_program("rta", FakeRetriever()).answer
    with dspy.context(lm=lm):
        result = fit_reader_yes_no(reader, tmp_path / "reads", tmp_path / "out", progress=False)
    assert seen == [[Take("d", "train", without=(1, 2))]]
    assert len(engine.calls) == 3  # the yes/no validation reads; Paris's and the train read are not asked
    fit = result["datasets"]["d"]
    assert fit["said_yes"] == {"written": 0, "calibrated": 1} and fit["right"] == {"written": 2, "calibrated": 3}
    assert json.loads((tmp_path / "out" / "yes-no.json").read_text()) == result
    with dspy.context(lm=lm):
        again = fit_reader_yes_no(reader, tmp_path / "reads", tmp_path / "out", progress=False)
    assert again == result and len(engine.calls) == 3  # every read was answered: nothing asked again


def test_a_fit_joins_the_released_readers_record_only_for_its_reads(tmp_path):
    from tests.fakes import write_released
    from treeqa.train.released import ReleasedReaderError, add_yes_no, released_reader

    folder = write_released(tmp_path / "released")  # its reads' sha256 is "ab" * 32
    fit = {"datasets": {"d": {"bias": 0.5}}, "reads_sha256": "ab" * 32}
    add_yes_no(fit, "bash benchmarks/released_reader.sh yes-no", folder)
    assert released_reader(folder).record["yes_no"] == {**fit, "command": "bash benchmarks/released_reader.sh yes-no"}
    with pytest.raises(ReleasedReaderError, match="yes/no fit is of reads cdcdcdcdcdcd"):
        add_yes_no({**fit, "reads_sha256": "cd" * 32}, "x", folder)
