"""The embedded engine gives its memory to a LoRA training and loads the model again on its next call;
an adapter's engine loads on its first call, so a program loaded for an endpoint never loads it."""

import dspy

from tests.fakes import FakeLlama
from treeqa.lm import LlamaEngine, _engine


class LoadedLlama(FakeLlama):
    """A FakeLlama that passes for a loaded llama.cpp model (it has a context) and can be closed."""

    _ctx = object()
    closed = 0

    def close(self):
        type(self).closed += 1

    def tokenize(self, data, add_bos=False, special=True):
        return data.split()


def test_an_unloaded_engine_reloads_on_its_next_call(monkeypatch):
    loads = []
    monkeypatch.setattr(LlamaEngine, "_load", staticmethod(lambda *a, **k: loads.append(a) or LoadedLlama()))
    engine = LlamaEngine(n_threads=2)
    engine.cpu_share = None
    assert len(loads) == 1
    assert engine.unload() is True and engine.llama is None and LoadedLlama.closed == 1
    assert engine.unload() is False  # nothing left to free
    lm = dspy.LM("local/fake", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        assert dspy.Predict("question -> answer")(question="q").answer == "Paris"
    assert len(loads) == 2 and engine.stats.calls == 1
    assert engine.count_prompt_tokens([{"role": "user", "content": "x"}]) > 0


def test_an_adapters_engine_loads_on_its_first_call_not_when_made(monkeypatch, tmp_path):
    loads = []
    monkeypatch.setattr(LlamaEngine, "_load", staticmethod(lambda *a, **k: loads.append(a) or LoadedLlama()))
    monkeypatch.setattr(_engine, "_local_engines", {})
    engine = _engine.local_engine(adapter=str(tmp_path / "a.gguf"), lazy=True)
    assert loads == [] and engine.llama is None
    lm = dspy.LM("local/fake", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        assert dspy.Predict("question -> answer")(question="q").answer == "Paris"
    assert len(loads) == 1 and loads[0][-1] == tmp_path / "a.gguf"


def test_unload_local_engines_frees_each_loaded_engine_and_keeps_stand_ins(monkeypatch):
    monkeypatch.setattr(LlamaEngine, "_load", staticmethod(lambda *a, **k: LoadedLlama()))
    real, stand_in = LlamaEngine(n_threads=2), LlamaEngine(llama=FakeLlama())
    monkeypatch.setattr(_engine, "_local_engines", {("a",): real, ("b",): stand_in})
    assert _engine.unload_local_engines() == 1
    assert real.llama is None and stand_in.llama is not None


def test_training_the_embedded_model_unloads_the_engine_first(monkeypatch, tmp_path):
    import pytest

    pytest.importorskip("peft")
    from tests.fakes import tiny_model, tiny_tokenizer
    from treeqa.lm import provider
    from treeqa.lm.lora import LoraRecipe

    order = []
    monkeypatch.setattr(_engine, "unload_local_engines", lambda: order.append("unload") or 1)
    monkeypatch.setattr(provider, "load_base", lambda *a: order.append("load base") or (tiny_tokenizer(), tiny_model()))
    monkeypatch.setattr("treeqa.lm.base_model_sha256", lambda: "tiny")
    chat = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    provider.train_adapter([chat], tmp_path, LoraRecipe(rank=2, alpha=4, top_layers=1, accumulate=1),
                           progress=False, device="cpu")
    assert order == ["unload", "load base"]


def test_a_lazy_engines_first_call_keeps_its_log_probabilities(monkeypatch, tmp_path):
    """The model loads inside the first call: whether log-probabilities can be given is decided
    after it, so the first question of a run (a calibrated yes/no, a judged review) gets them."""
    from treeqa.judging.verdicts import LOGPROBS

    class Decoding:
        top_logprobs = None

        class last:  # one step a generated token: (token, logprob, alternatives)
            logprobs = [(1, -0.1, [(1, -0.1), (2, -2.4)])] + [(0, 0.0, [])] * 4

    class WithDecoding(LoadedLlama):
        treeqa_decoding = Decoding()

        def __init__(self):
            super().__init__(reply="[[ ## verdict ## ]]\nTrue\n\n[[ ## completed ## ]]")

        def detokenize(self, tokens):
            return {0: b"", 1: b"[[ ## verdict ## ]]\nTrue", 2: b"False"}[tokens[0]]

    monkeypatch.setattr(LlamaEngine, "_load", staticmethod(lambda *a, **k: WithDecoding()))
    monkeypatch.setattr(_engine, "_local_engines", {})
    engine = _engine.local_engine(adapter=str(tmp_path / "a.gguf"), lazy=True)
    lm = dspy.LM("local/fake", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        pred = dspy.Predict("question -> verdict: bool")(question="q", config=LOGPROBS)
    assert pred.verdict is True and pred.logprobs["content"][0]["top_logprobs"][1]["token"] == "False"
