import hashlib
import os
import threading

import dspy
import pytest

import treeqa.lm
from tests.fakes import FakeEndpoint, FakeLlama, run_cli
from treeqa.lm import LlamaEngine, get_lm
from treeqa.lm import _weights as local_model


def _lm(fake, **kw):
    return dspy.LM("local/fake", engine=LlamaEngine(llama=fake, **kw), cache=False, num_retries=0)


def test_engine_answers_through_dspy_with_usage():
    fake = FakeLlama()
    lm = _lm(fake)
    with dspy.context(lm=lm), dspy.track_usage() as usage:
        pred = dspy.Predict("question -> answer")(question="Capital of France?")
    assert pred.answer == "Paris"
    (call,) = fake.calls
    assert call["temperature"] == 0.0  # greedy
    roles = [m["role"] for m in call["messages"]]
    assert roles[0] == "system" and roles[-1] == "user"
    assert "Capital of France?" in call["messages"][-1]["content"]
    totals = usage.get_total_tokens()["local/fake"]
    assert totals["prompt_tokens"] == 100 and totals["completion_tokens"] == 5


def test_engine_counts_prompt_tokens_actually_computed():
    fake = FakeLlama()
    engine = LlamaEngine(llama=fake)
    lm = dspy.LM("local/fake", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        dspy.Predict("question -> answer")(question="q")
    assert engine.stats.calls == 1
    assert engine.stats.prompt_tokens == 100
    assert engine.stats.prompt_tokens_computed == 30  # the other 70 came from the prefix cache
    assert engine.stats.completion_tokens == 5


def test_token_budget_reaches_the_engine():
    fake = FakeLlama()
    with dspy.context(lm=_lm(fake, max_tokens=77)):
        dspy.Predict("question -> answer")(question="q")
        dspy.Predict("question -> answer", max_tokens=9)(question="q2")
    assert [c["max_tokens"] for c in fake.calls] == [77, 9]


def test_concurrent_calls_are_serialised():
    fake = FakeLlama(delay=0.05)
    lm = _lm(fake)

    def ask(i):
        with dspy.context(lm=lm):
            dspy.Predict("question -> answer")(question=f"q{i}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.calls) == 4
    assert fake.max_active == 1


def test_remote_names_go_to_dspy_lm():
    lm = get_lm("hosted_vllm/Qwen2.5-7B-Instruct", api_base="http://127.0.0.1:8000/v1")
    assert isinstance(lm, dspy.LM)
    assert lm.model == "hosted_vllm/Qwen2.5-7B-Instruct"
    assert lm.kwargs["api_base"] == "http://127.0.0.1:8000/v1"
    with pytest.raises(ValueError, match="LM name is required"):
        get_lm(" ")


def test_an_endpoint_decodes_greedily_unless_told_otherwise():
    """A server's default temperature samples (llama.cpp's server, vLLM): the same question
    gave different answers run to run. The request must carry temperature 0, as the embedded
    engine decodes, unless the caller asks for another; OpenAI's reasoning models take none."""
    bodies = []
    with FakeEndpoint(lambda n, body, headers: (bodies.append(body), (200, "fine", 0))[1]) as ep:
        assert get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)("hello") == ["fine"]
        get_lm("openai/m", api_base=ep.url, api_key="k", cache=False, temperature=0.7)("hello")
    assert [b.get("temperature") for b in bodies] == [0.0, 0.7]
    assert get_lm("openai/o3", api_key="k").kwargs.get("temperature") is None


def test_a_server_of_ones_own_decodes_without_a_repeat_penalty():
    """llama-cpp-python's server penalises repeated tokens unless told not to (1.1): under it a
    1.5B model's reviews flipped their second `true` and zero-shot ToR searched to its bounds.
    A server of one's own gets 1.0 unless the caller sends its own; OpenAI's endpoint gets nothing."""
    bodies = []
    with FakeEndpoint(lambda n, body, headers: (bodies.append(body), (200, "fine", 0))[1]) as ep:
        get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)("hello")
        get_lm("openai/m", api_base=ep.url, api_key="k", cache=False,
               extra_body={"repeat_penalty": 1.3, "top_k": 1})("hello")
    assert bodies[0].get("repeat_penalty") == 1.0
    assert bodies[1].get("repeat_penalty") == 1.3 and bodies[1].get("top_k") == 1
    assert "extra_body" not in get_lm("openai/gpt-4o-mini", api_base="https://api.openai.com/v1", api_key="k").kwargs


def test_a_servers_token_cap_travels_as_max_tokens():
    """DSPy's OpenAI dialect sends the cap as `max_completion_tokens`, which llama.cpp's server
    ignores (a greedy ReAct step then ran to the context's end); a server of one's own gets
    `max_tokens`, while OpenAI's own endpoint keeps its dialect."""
    bodies = []
    with FakeEndpoint(lambda n, body, headers: (bodies.append(body), (200, "fine", 0))[1]) as ep:
        get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)("hello", max_tokens=7)
    assert bodies[-1].get("max_tokens") == 7 and "max_completion_tokens" not in bodies[-1]
    assert get_lm("openai/gpt-4o-mini", api_base="https://api.openai.com/v1", api_key="k").model == "openai/gpt-4o-mini"


def test_missing_model_names_the_install_command(settings_env, tmp_path):
    settings_env(cache_dir=tmp_path)
    with pytest.raises(local_model.ModelMissingError, match="treeqa model install"):
        local_model.model_path()


def test_install_assembles_and_verifies(settings_env, tmp_path, monkeypatch):
    settings_env(cache_dir=tmp_path / "cache")
    chunks = [b"GGUF" + bytes(range(50)), b"more-bytes" * 7, b"tail"]
    parts = []
    for i, chunk in enumerate(chunks):
        parts.append(tmp_path / f"part{i:02d}.bin")
        parts[-1].write_bytes(chunk)
    whole = b"".join(chunks)
    monkeypatch.setattr(local_model, "part_files", lambda: parts)
    monkeypatch.setattr(local_model, "SIZE", len(whole))
    monkeypatch.setattr(local_model, "SHA256", hashlib.sha256(whole).hexdigest())
    path = local_model.install(progress=False)
    assert path.read_bytes() == whole
    assert local_model.model_path() == path

    monkeypatch.setattr(local_model, "SHA256", "0" * 64)
    monkeypatch.setattr(local_model, "assembled_path", lambda: tmp_path / "cache" / "other.gguf")
    with pytest.raises(ValueError, match="corrupt"):
        local_model.install(progress=False)
    assert not (tmp_path / "cache" / "other.gguf").exists()
    assert not (tmp_path / "cache" / "other.partial").exists()


def test_a_same_size_file_is_not_taken_for_the_model(settings_env, tmp_path, monkeypatch):
    settings_env(cache_dir=tmp_path / "cache")
    whole = b"GGUF" + bytes(range(60))
    part = tmp_path / "part00.bin"
    part.write_bytes(whole)
    monkeypatch.setattr(local_model, "part_files", lambda: [part])
    monkeypatch.setattr(local_model, "SIZE", len(whole))
    monkeypatch.setattr(local_model, "SHA256", hashlib.sha256(whole).hexdigest())
    target = local_model.assembled_path()
    target.parent.mkdir(parents=True)
    target.write_bytes(bytes(len(whole)))  # zero-filled, the right size, never verified
    with pytest.raises(local_model.ModelCorruptError, match="model install --force"):
        local_model.model_path()
    assert local_model.install(progress=False).read_bytes() == whole  # hashed, found wrong, reassembled
    assert local_model.model_path() == target
    target.write_bytes(bytes(len(whole)))  # replaced after verification: the stamp no longer fits
    os.utime(target, ns=(1, 1))  # whatever the file system's clock resolution
    with pytest.raises(local_model.ModelCorruptError, match=str(target.name)):
        local_model.model_path()


def test_the_installed_llama_cpp_is_built_without_amx_kernels():
    """They segfault the first decode on AMX Xeons; the Makefile compiles them out."""
    from treeqa.lm._engine import ggml_has_amx

    assert ggml_has_amx() is False


def test_extra_buffer_types_are_off_only_while_an_amx_build_loads():
    import llama_cpp.llama_cpp as api

    from treeqa.lm._engine import _extra_buffer_types_off

    assert api.llama_model_default_params().use_extra_bufts is True
    with _extra_buffer_types_off():
        assert api.llama_model_default_params().use_extra_bufts is False
    assert api.llama_model_default_params().use_extra_bufts is True








class _Planted:
    """A type no cache entry of ours ever holds."""


def test_dspy_cache_refuses_unknown_pickled_types(settings_env, tmp_path, monkeypatch):
    from dspy.clients.disk_serialization import DeserializationError

    import treeqa.lm

    settings_env(cache_dir=tmp_path)
    monkeypatch.setattr(treeqa.lm, "_cache_secured", False)
    previous = dspy.cache
    try:
        get_lm("openai/gpt-4o-mini")  # the door secures the cache
        disk = dspy.cache.disk_cache
        assert str(tmp_path) in str(disk.directory)
        disk["planted"] = _Planted()  # what a planted file would unpickle to
        with pytest.raises(DeserializationError, match="not in the safe_types allowlist"):
            disk["planted"]
    finally:
        dspy.cache = previous


# benchmarks/faults.md, second round #6: the response cache is kept per endpoint; ask and serve can go without it

def test_6_two_endpoints_never_share_cached_answers(settings_env, tmp_path):
    settings_env(cache_dir=tmp_path / "cache")
    answers = {}
    for city in ("Paris", "Lyon"):
        with FakeEndpoint(lambda n, body, headers, city=city: (200, f"[[ ## answer ## ]]\n{city}", 0)) as ep:
            lm = treeqa.lm.get_lm("openai/same-name", api_base=ep.url, api_key="k", cache=True)
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                answers[city] = [dspy.Predict("question -> answer")(question="capital?").answer for _ in range(2)]
            assert ep.requests == 1  # the second question came from the cache
    assert answers == {"Paris": ["Paris", "Paris"], "Lyon": ["Lyon", "Lyon"]}


def test_6_ask_without_the_cache(scripted):
    seen = {}
    real = treeqa.lm.get_lm
    treeqa.lm.get_lm = lambda name, **kw: seen.update(kw) or real(name, **kw)
    try:
        run_cli("ask", "Is Weggis on the lake?", "--no-cache")
    finally:
        treeqa.lm.get_lm = real
    assert seen.get("cache") is False


# benchmarks/faults.md, second round #11: the in-memory response cache is bounded

def test_11_the_memory_cache_is_bounded(settings_env, tmp_path, monkeypatch):
    settings_env(cache_dir=tmp_path / "cache", memory_cache_entries=64)
    monkeypatch.setattr(treeqa.lm, "_cache_secured", False)
    treeqa.lm.secure_cache()
    assert dspy.cache.memory_cache.maxsize == 64
