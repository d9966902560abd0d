"""`--optimizer trained-reader` (ToR's and the beam's default compile after the path judge): the
program reads in rta's prompt through the released reader when its record fits the compile, a
record that does not fit is refused by name, and an endpoint needs the model that serves it."""

import hashlib
import json

import dspy
import pytest

from tests.fakes import FakeRetriever, write_released
from treeqa.optimize import OptimizeSpec, plan
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.programs.beam_search import BeamSearchQA
from treeqa.programs.compiled import adapter_lms, load_program, save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.teleprompt.trained_reader import TrainedReader, with_trained_reading
from treeqa.train.reader import ReaderRecipe
from treeqa.train.released import ReleasedReaderError, released_reader


@pytest.fixture
def engines(scripted_engines):
    return scripted_engines


@pytest.fixture
def released(engines, tmp_path, monkeypatch):
    folder = write_released(tmp_path / "released")
    monkeypatch.setattr("treeqa.train.released.RELEASED_DIR", folder)
    return folder


def _tor():
    tor = TreeOfReviews(FakeRetriever(), widths=(3, 2))
    tor.fuse.demos = [dspy.Example(question="q", evidence=["Analysis: a"], answer="a")]
    tor.review.demos = [dspy.Example(question="q", paragraphs=["p"], relevant=True)]
    return tor


def test_tor_reads_in_rtas_prompt_through_the_released_reader_and_its_file_says_so(released, tmp_path):
    compiled = TrainedReader().compile(_tor(), trainset=[])
    assert (compiled.fusion, compiled.read_top, compiled.max_paragraph_chars, compiled.widths) == \
        ("passages", 5, 1000, (3, 2))  # the reading changed, the search did not
    assert compiled.fuse.signature.equals(RetrieveThenAnswer(FakeRetriever()).answer.signature)
    assert compiled.fuse.demos == [] and len(compiled.review.demos) == 1  # the reader bare, as it was trained
    assert set(adapter_lms(compiled)) == {"fuse"}
    fit = compiled.trained_reader_fit
    assert fit["reader"] == "released" and fit["predictor"] == "fuse" and fit["best"]["val_loss"] == 0.35
    assert fit["adapter_sha256"] == hashlib.sha256((released / "adapter.gguf").read_bytes()).hexdigest()
    path = save_compiled(compiled, tmp_path / "out" / "compiled.json", name="tor", dataset="hotpotqa",
                         retriever="dense")
    loaded = load_program(path, retriever=FakeRetriever())
    assert (loaded.fusion, loaded.read_top) == ("passages", 5) and set(adapter_lms(loaded)) == {"fuse"}


def test_the_beam_and_rta_read_as_their_classes_declare(released):
    beam = TrainedReader().compile(BeamSearchQA(FakeRetriever(), evidence="retrieval"), trainset=[])
    assert beam.reading == "passages" and set(adapter_lms(beam)) == {"answer"}
    rta = RetrieveThenAnswer(FakeRetriever(), k=5)
    assert with_trained_reading(rta) is rta  # read as it is
    assert set(adapter_lms(TrainedReader().compile(rta, trainset=[]))) == {"answer"}


def test_a_released_reader_that_does_not_fit_is_refused_by_name(engines, tmp_path, monkeypatch):
    other = ReaderRecipe().to_dict()
    other["lora"]["learning_rate"] = 2e-4
    monkeypatch.setattr("treeqa.train.released.RELEASED_DIR", write_released(tmp_path / "a", recipe=other))
    with pytest.raises(ValueError, match=r"lora.learning_rate: 0.0002 != 0.0005.*--reader train"):
        TrainedReader().compile(_tor(), trainset=[])
    monkeypatch.setattr("treeqa.train.released.RELEASED_DIR", write_released(tmp_path / "b", base="f" * 64))
    with pytest.raises(ValueError, match="base model"):
        TrainedReader().compile(_tor(), trainset=[])
    cpu = ReaderRecipe().to_dict()
    cpu["lora"]["lower_dtype"] = "bfloat16"  # how fast it trained, not what it learned: fits
    monkeypatch.setattr("treeqa.train.released.RELEASED_DIR", write_released(tmp_path / "c", recipe=cpu))
    assert TrainedReader().compile(_tor(), trainset=[]).trained_reader_fit["reader"] == "released"


def test_a_changed_or_missing_released_adapter_is_an_error(engines, tmp_path):
    folder = write_released(tmp_path / "r")
    assert released_reader(folder).record["reads"]["train_reads"] == 1073
    (folder / "adapter.gguf").write_bytes(b"other bytes")
    with pytest.raises(ReleasedReaderError, match="sha256"):
        released_reader(folder)
    with pytest.raises(ReleasedReaderError, match="--reader none"):
        released_reader(tmp_path / "nowhere")
    (folder / "reader.json").write_text("{")
    with pytest.raises(ReleasedReaderError, match="not a reader record"):
        released_reader(folder)


def test_on_an_endpoint_the_reader_asks_the_model_that_serves_the_adapter(released, tmp_path):
    from treeqa.programs.compiled import CompiledProgramError, run_adapters_with

    endpoint = dspy.LM("openai/base", api_base="http://127.0.0.1:9/v1", api_key="x")
    with dspy.context(lm=endpoint), pytest.raises(ValueError, match="--reader-model"):
        TrainedReader().compile(_tor(), trainset=[])
    with dspy.context(lm=endpoint):
        compiled = TrainedReader(reader_model="openai/treeqa-reader").compile(_tor(), trainset=[])
    assert set(adapter_lms(compiled)) == {"fuse"}  # the file records the adapter wherever it runs
    assert compiled.trained_reader_fit["served_as"] == "openai/treeqa-reader"
    path = save_compiled(compiled, tmp_path / "c" / "compiled.json", name="tor", dataset="hotpotqa", retriever="dense")
    assert json.loads(path.read_text())["treeqa"]["adapter"]["predictors"] == ["fuse"]
    with pytest.raises(ValueError, match="--reader-model"):
        run_adapters_with(compiled, endpoint, cache=False)
    run_adapters_with(compiled, endpoint, cache=False, reader_model="openai/treeqa-reader")
    assert compiled.fuse.lm.model.endswith("/treeqa-reader") and compiled.fuse.lm.kwargs["api_base"] == \
        "http://127.0.0.1:9/v1"
    assert compiled.review.lm is None  # the others answer through the run's LM
    with dspy.context(lm=endpoint):  # an app: the endpoint configured, then the file loaded
        with pytest.raises(CompiledProgramError, match="reader_model"):
            load_program(path, retriever=FakeRetriever())
        served = load_program(path, retriever=FakeRetriever(), reader_model="openai/treeqa-reader")
    assert served.fuse.lm.model.endswith("/treeqa-reader")


def test_the_spec_fits_the_trained_reader_to_programs_that_declare_a_reading():
    assert OptimizeSpec(program="tor").optimizer == "bootstrap"  # a given optimizer is kept
    assert OptimizeSpec(program="beam", optimizer=None, train=None).optimizer == "path-judge+trained-reader"
    assert OptimizeSpec(program="rta", optimizer="trained-reader", train=1).optimizer == "trained-reader"
    with pytest.raises(ValueError, match="no reading in rta's prompt"):
        OptimizeSpec(program="direct", optimizer="trained-reader")
    with pytest.raises(ValueError, match="evidence='retrieval'"):
        OptimizeSpec(program="beam", preset="webq", optimizer="trained-reader", train=5)
    with pytest.raises(ValueError, match="--reader none"):
        OptimizeSpec(program="tor", optimizer="path-judge+trained-reader", reader="none")
    with pytest.raises(ValueError):
        OptimizeSpec(program="tor", reader="mine")


def test_the_plan_prices_a_training_only_when_one_is_asked_for(released):
    released_plan = plan(OptimizeSpec(program="tor", optimizer=None, train=None, dev=2))
    assert released_plan["compile_max"] == 0 and "training_seconds_est" not in released_plan
    trained = plan(OptimizeSpec(program="tor", optimizer=None, train=None, dev=2, reader="train"))
    assert trained["training_seconds_est"] > 3600  # hours on 2 cores: said before it starts


def test_the_default_compile_of_tor_is_the_judge_then_the_trained_reader_in_one_file(released, train, tmp_path):
    """`optimize --program tor`'s compile as `compile_program` runs it: the path judge fitted from
    the annotations, the annotated demos kept on the search's predictors, the reader bare in rta's
    prompt through the released adapter; the file reloads all of it."""
    from treeqa.judging.path_judge import PathJudge
    from treeqa.lm import get_lm
    from treeqa.optimize.run import Checked, compile_program

    hotpot, _ = train
    spec = OptimizeSpec(program="tor", optimizer=None, train=None)
    assert spec.optimizer == "path-judge+released-settings+trained-reader"
    checked = Checked(tmp_path, spec.eval_spec(), "hotpotqa", {"train": "train", "dev": "dev"}, hotpot, hotpot, None,
                      FakeRetriever(), spec.resolved.build(FakeRetriever()))
    compiled, info = compile_program(spec, checked, get_lm("local", cache=False), echo=lambda *a: None)
    assert info["lm_calls"] == 0 and info["judge_fit"] and info["trained_reader_fit"]["reader"] == "released"
    assert (compiled.fusion, compiled.read_top) == ("passages", 5) and compiled.path_judge
    assert compiled.expansion == "linked" and info["settings_search"]["released"] == "tor.json"  # the priced choice
    assert compiled.fuse.demos == [] and compiled.review.demos  # the search's demos stay, the reader is bare
    loaded = load_program(tmp_path / "compiled.json", retriever=FakeRetriever())
    assert PathJudge.model_validate(loaded.path_judge) == PathJudge.model_validate(compiled.path_judge)
    assert set(adapter_lms(loaded)) == {"fuse"} and loaded.fusion == "passages"
    recipe = json.loads((tmp_path / "compiled.json").read_text())["treeqa"]
    assert recipe["compile"]["trained_reader_fit"]["adapter_sha256"] == recipe["adapter"]["sha256"]


def test_a_served_reader_is_asked_in_the_prompt_it_was_trained_in(released, monkeypatch):
    """On an endpoint the run's adapter is DSPy's chat adapter; the served reader is asked in the
    JSON adapter's prompt, as on the embedded model where it was trained, and nothing else is."""
    from tests.fakes.lm import Raw, scripted_lm
    from treeqa.programs.compiled import run_adapters_with
    from treeqa.programs.compiled.adapters import TrainedPromptPredict

    reader_lm, reader_engine = scripted_lm(lambda kind, inputs: Raw('{"answer": "Paris"}'))  # a JSON reply
    run_lm, run_engine = scripted_lm(lambda kind, inputs: {"answer": "elsewhere"})
    run_lm.kwargs["api_base"] = "http://127.0.0.1:9/v1"
    rta = TrainedReader().compile(RetrieveThenAnswer(FakeRetriever(), k=2), trainset=[])
    tor = TrainedReader().compile(_tor(), trainset=[])
    monkeypatch.setattr("treeqa.lm.get_lm", lambda name, **kw: reader_lm)  # the endpoint's served reader
    run_adapters_with(rta, run_lm, cache=False, reader_model="openai/treeqa-reader")
    with dspy.context(lm=run_lm, adapter=dspy.ChatAdapter()):
        assert rta(question="What is the capital of France?").answer == "Paris"
    [call] = reader_engine.calls  # the JSON adapter's prompt, not the chat adapter's
    assert "Respond with a JSON object" in call.messages[-1]["content"] and run_engine.calls == []
    run_adapters_with(tor, run_lm, cache=False, reader_model="openai/treeqa-reader")
    assert isinstance(tor.fuse, TrainedPromptPredict) and type(tor.review) is dspy.Predict
    assert tor.fuse.demos == [] and tor.fuse.signature.equals(rta.answer.signature)  # its state as it was


def test_the_released_readers_yes_no_calibration_for_the_compiles_dataset_is_applied(engines, tmp_path, monkeypatch):
    from treeqa.programs.compiled.yes_no import YesNoCalibratedPredict

    folder = write_released(tmp_path / "released")
    record = json.loads((folder / "reader.json").read_text())
    record["yes_no"] = {"fitted_on": "validation reads", "datasets": {
        "2wikimultihopqa": {"bias": 1.25, "reads": 20, "prior": {"questions": 101, "yes": 26, "share": 0.2574}}}}
    (folder / "reader.json").write_text(json.dumps(record))
    monkeypatch.setattr("treeqa.train.released.RELEASED_DIR", folder)
    rta = RetrieveThenAnswer(FakeRetriever(), k=5)
    compiled = TrainedReader(dataset="2wikimultihopqa").compile(rta, trainset=[])
    assert isinstance(compiled.answer, YesNoCalibratedPredict) and compiled.answer.yes_no_bias == 1.25
    path = save_compiled(compiled, tmp_path / "out" / "compiled.json", name="rta", dataset="2wikimultihopqa",
                         retriever="dense")
    saved = json.loads(path.read_text())["treeqa"]["yes_no"]
    assert saved["bias"] == 1.25 and saved["dataset"] == "2wikimultihopqa" and saved["predictors"] == ["answer"]
    loaded = load_program(path, retriever=FakeRetriever())
    assert loaded.answer.yes_no_bias == 1.25 and set(adapter_lms(loaded)) == {"answer"}
    other = TrainedReader(dataset="musique").compile(RetrieveThenAnswer(FakeRetriever(), k=5), trainset=[])
    assert not isinstance(other.answer, YesNoCalibratedPredict)  # no fit for MuSiQue: the reader as it writes
