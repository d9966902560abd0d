"""Every registered program honours the contract the rest of the package reads."""

import json

import dspy
import pytest

import treeqa.retrievers
from tests.fakes import FakeRetriever, generic_lm
from treeqa.optimize import OptimizeSpec, max_calls_per_question, run_optimize
from treeqa.programs import PROGRAMS, QAProgram, build_program, call_bound, resolve_settings, uses_retriever
from treeqa.programs.compiled import load_program, save_compiled

# settings of some programs changed from their defaults, to see them survive a round trip; any
# other program gets the first value of its declared settings space that is not its default
CHANGED = {"beam": {"beam_size": 3, "threshold": 0.6}, "tor": {"widths": [3, 2], "expansion": "direct"},
           "cor": {"k": 3, "max_turns": 2}, "rta": {"k": 4}}


def changed(name: str) -> dict:
    if name in CHANGED:
        return CHANGED[name]
    defaults = resolve_settings(name)
    for key, values in PROGRAMS[name].settings_space().items():
        other = [v for v in values if v != defaults[key]]
        if other:
            return {key: other[0]}
    return {}


def _build(name, **params):
    retriever = FakeRetriever() if uses_retriever(name, params) else None
    return build_program(name, retriever, **params)


def test_every_program_is_registered_with_a_contract():
    assert set(CHANGED) <= set(PROGRAMS)
    for cls in PROGRAMS.values():
        assert issubclass(cls, QAProgram)
        assert isinstance(cls.retrieves, bool) and isinstance(cls.concurrent, bool)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_settings_round_trip_through_a_compiled_file(name, tmp_path):
    program = _build(name, **changed(name))
    resolved = resolve_settings(name, changed(name))
    assert set(program.settings) == set(resolved)
    assert all(program.settings[k] == resolved[k] for k in changed(name) if k != "widths")
    path = save_compiled(program, tmp_path / f"{name}.json", name=name, dataset="hotpotqa", retriever="dense")
    stored = json.loads(path.read_text())["treeqa"]
    assert stored["format"] == 2 and "threads" not in stored["settings"]
    loaded = load_program(path, retriever=FakeRetriever())
    assert type(loaded) is type(program) and loaded.settings == program.settings
    # runs count parse attempts by signature name: a loaded program keeps its signatures' names
    names = [p.signature.__name__ for _, p in program.named_predictors()]
    assert [p.signature.__name__ for _, p in loaded.named_predictors()] == names


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_call_bound_holds_on_a_scripted_run(name):
    program = _build(name, **changed(name))
    lm = generic_lm({"": "Paris"})
    with dspy.context(lm=lm):
        program(question="What is the capital of France?")
    calls = len(lm._engine_spec.calls)
    assert 1 <= calls <= call_bound(name, changed(name)) == max_calls_per_question(program)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_program_compiles_with_an_em_teleprompter(name, tmp_path):
    """DSPy's BootstrapFewShot against EM puts demos on a program's predictors; they survive a
    compiled file and the compiled program answers."""
    from dspy.teleprompt import BootstrapFewShot

    from treeqa.teleprompt.metrics import em_metric

    train = [dspy.Example(question=f"What is the capital of France, ({i})?", answers=["Paris"]).with_inputs("question")
             for i in range(2)]
    lm = generic_lm({"": "Paris"})
    with dspy.context(lm=lm):
        compiled = BootstrapFewShot(metric=em_metric, max_bootstrapped_demos=1, max_labeled_demos=0).compile(
            _build(name), trainset=train)
        assert compiled(question="What is the capital of France?").answer == "Paris"
    demos = {p_name: len(p.demos) for p_name, p in compiled.named_predictors()}
    assert any(demos.values()), demos
    path = save_compiled(compiled, tmp_path / f"{name}.json", name=name, dataset="hotpotqa", retriever="dense")
    loaded = load_program(path, retriever=FakeRetriever())
    assert {p_name: len(p.demos) for p_name, p in loaded.named_predictors()} == demos


def test_a_format_1_compiled_file_still_loads(tmp_path):
    program = build_program("beam", FakeRetriever(), preset="nq", max_queries=3)
    path = save_compiled(program, tmp_path / "old.json", name="beam", dataset="hotpotqa", retriever="dense")
    state = json.loads(path.read_text())
    state["treeqa"] = {"format": 1, "program": "beam", "dataset": "hotpotqa", "retriever": "dense",
                       "preset": "nq", "params": {"max_queries": 3}}  # what the first format stored
    path.write_text(json.dumps(state))
    assert load_program(path, retriever=FakeRetriever()).settings == program.settings


def test_the_plan_needs_no_index_and_no_model(fixture_data, monkeypatch):
    def no_index(*args, **kwargs):
        raise AssertionError("the plan must not build or load an index")

    monkeypatch.setattr(treeqa.retrievers, "get_retriever", no_index)
    monkeypatch.setattr("treeqa.lm.get_lm", no_index)
    result = run_optimize(OptimizeSpec(program="tor", dataset="hotpotqa", train=2, dev=3), plan_only=True,
                          echo=lambda *_: None)
    assert result["plan"]["calls_per_question_max"] == 5 + 15 + 45 + 5 + 15 + 1
    assert result["plan"]["zero_shot_max"] == 3 * result["plan"]["calls_per_question_max"]


def test_safe_call_records_lm_failures_but_lets_our_own_bugs_through():
    from tests.fakes import scripted_lm
    from treeqa.evaluation.metrics import recall_at_k
    from treeqa.programs.common import safe_call

    failures = []
    lm, _ = scripted_lm(lambda kind, inputs: TypeError("the endpoint sent something odd"))
    with dspy.context(lm=lm):
        assert safe_call(dspy.Predict("question -> answer"), failures, "answer", question="q") is None
    assert [f["where"] for f in failures] == ["answer"]  # DSPy wraps it (LMUnexpectedError): recorded
    with pytest.raises(TypeError):  # treeqa code called wrongly: a bug, not an LM failure
        safe_call(recall_at_k, failures, "recall", retrieved=["a"])
    assert len(failures) == 1


def test_a_bug_in_our_engine_code_is_not_taken_for_an_lm_failure(monkeypatch):
    from treeqa.lm import LlamaEngine
    from treeqa.programs.common import safe_call

    class Broken:
        def create_chat_completion(self, **kw):
            return {"choices": None}  # the engine's own code then indexes None: a TypeError in treeqa

    lm = dspy.LM("local/broken", engine=LlamaEngine(llama=Broken()), cache=False, num_retries=0)
    with dspy.context(lm=lm), pytest.raises(Exception) as err:
        safe_call(dspy.Predict("question -> answer"), [], "answer", question="q")
    from treeqa.programs.common import is_our_bug

    assert is_our_bug(err.value)


@pytest.mark.parametrize("call", [uses_retriever, call_bound, resolve_settings])
def test_an_unknown_program_is_a_clear_error_everywhere(call):
    with pytest.raises(ValueError, match="unknown program 'nosuch'"):
        call("nosuch")
