"""`--optimizer released-settings`: the settings a priced search chose once, read from its record
and applied to the program (its predictors' state and earlier fits kept), recorded in compiled.json;
a missing or torn record is an error that names it."""

import json

import dspy
import pytest

from tests.fakes import FakeRetriever, write_released
from treeqa.programs.beam_search import BeamSearchQA
from treeqa.programs.compiled import adapter_lms, load_program, save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.teleprompt import compilers
from treeqa.teleprompt.released_settings import ReleasedSettings, released_settings
from treeqa.teleprompt.trained_reader import TrainedReader

RECORD = {"program": "tor", "chosen": {"expansion": "concat"},
          "tried": [{"settings": {"expansion": "mpc"}, "em": 30.0, "seconds_per_q": 24.0, "cost_ratio": 3.0},
                    {"settings": {"expansion": "concat"}, "em": 29.0, "seconds_per_q": 9.0, "cost_ratio": 1.1}],
          "budget": {"baseline": "rta", "baseline_seconds_per_q": 8.0, "max_cost_ratio": 2.0, "within": True},
          "sample": "66 validation questions", "reader_sha256": "ab" * 32}


@pytest.fixture
def record_dir(tmp_path, monkeypatch):
    folder = tmp_path / "released-settings"
    folder.mkdir()
    (folder / "tor.json").write_text(json.dumps(RECORD))
    monkeypatch.setattr("treeqa.teleprompt.released_settings.RELEASED_SETTINGS_DIR", folder)
    return folder


def _tor():
    tor = TreeOfReviews(FakeRetriever(), widths=(3, 2), read_top=5)
    tor.review.demos = [dspy.Example(question="q", paragraphs=["p"], relevant=True)]
    tor.judge_fit = {"cases": 12}
    return tor


def test_the_released_choice_is_applied_and_the_search_recorded(record_dir):
    compiled = ReleasedSettings().compile(_tor(), trainset=[])
    assert (compiled.expansion, compiled.widths, compiled.read_top) == ("concat", (3, 2), 5)  # only the choice
    assert "complete_paragraph" not in dict(compiled.named_predictors())  # concat writes no query
    assert len(compiled.review.demos) == 1 and compiled.judge_fit == {"cases": 12}  # earlier stages kept
    search = compiled.settings_search
    assert search["released"] == "tor.json" and search["chosen"] == {"expansion": "concat"}
    assert [t["cost_ratio"] for t in search["tried"]] == [3.0, 1.1] and search["budget"]["max_cost_ratio"] == 2.0


def test_the_trained_reader_after_it_keeps_the_search_and_the_file_reloads_it(record_dir, scripted_engines,
                                                                             tmp_path, monkeypatch):
    monkeypatch.setattr("treeqa.train.released.RELEASED_DIR", write_released(tmp_path / "reader"))
    compiled = TrainedReader().compile(ReleasedSettings().compile(_tor(), trainset=[]), trainset=[])
    assert (compiled.expansion, compiled.fusion) == ("concat", "passages")
    assert compiled.settings_search["released"] == "tor.json"
    path = save_compiled(compiled, tmp_path / "out" / "compiled.json", name="tor", dataset="hotpotqa",
                         retriever="dense")
    loaded = load_program(path, retriever=FakeRetriever())
    assert (loaded.expansion, loaded.fusion) == ("concat", "passages") and set(adapter_lms(loaded)) == {"fuse"}


def test_a_torn_record_is_named_and_a_program_without_one_does_not_fit(record_dir):
    assert released_settings("beam") is None
    assert not compilers()["released-settings"].fits(BeamSearchQA) and compilers()["released-settings"].fits(
        TreeOfReviews)
    with pytest.raises(ValueError, match="no released settings"):
        ReleasedSettings().compile(BeamSearchQA(FakeRetriever()), trainset=[])
    (record_dir / "tor.json").write_text(json.dumps({**RECORD, "program": "beam"}))
    with pytest.raises(ValueError, match=r"tor.json: not a released settings record"):
        released_settings("tor")
    (record_dir / "tor.json").write_text("{")
    with pytest.raises(ValueError, match="not a released settings record"):
        ReleasedSettings().compile(_tor(), trainset=[])
