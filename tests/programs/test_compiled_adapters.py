"""A compiled file's adapter is untrusted input (benchmarks/faults.md, fourth round #1 and #9):
one that matches its record but is torn is refused before the engine or an index sees it; a
record's non-finite size, a symlinked adapter and one over the size limit are one clear line;
and `ask`/`serve` hold an adapter's predictors to `--lm` and `--no-cache` as `evaluate` does."""

import json
from pathlib import Path

import pytest

from tests.fakes import FakeRetriever, compiled_with_adapter, loaded_adapter, run_cli
from treeqa.lm.adapter import AdapterError, AdapterRef
from treeqa.programs.compiled import CompiledProgramError, adapter_lms, load_program


def test_1_a_torn_adapter_that_matches_its_record_is_refused_before_the_engine(base, engines, tmp_path):
    good = compiled_with_adapter(tmp_path / "good")
    assert set(adapter_lms(load_program(good))) == {"answer"}
    torn = compiled_with_adapter(tmp_path / "torn", tear=100)
    with pytest.raises(CompiledProgramError, match="cut short|not a whole GGUF"):
        load_program(torn)
    # no engine was made for the torn one, and the good one's is its private copy
    assert list(engines) == [loaded_adapter(tmp_path / "good" / "adapter.gguf")]


def test_9_a_bad_or_missing_adapter_is_refused_before_an_index_is_built(base, engines, tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: built.append(a) or FakeRetriever())
    torn = compiled_with_adapter(tmp_path / "torn", program="rta", tear=100)
    with pytest.raises(CompiledProgramError, match="cut short|not a whole GGUF"):
        load_program(torn)
    missing = compiled_with_adapter(tmp_path / "missing", program="rta")
    (tmp_path / "missing" / "adapter.gguf").unlink()
    with pytest.raises(CompiledProgramError, match="missing"):
        load_program(missing)
    result = run_cli("ask", "Who?", "--compiled", str(missing), "--retriever", "bm25")  # an index of its own
    assert result.exit_code == 1 and "missing" in result.output
    assert built == []


def test_9_a_recorded_size_that_is_not_finite_is_refused_cleanly(base, tmp_path):
    path = compiled_with_adapter(tmp_path)
    state = json.loads(path.read_text())
    path.write_text(path.read_text().replace(f'"bytes": {state["treeqa"]["adapter"]["bytes"]}', '"bytes": 1e400'))
    with pytest.raises(CompiledProgramError, match="1e400 is not a finite number"):
        load_program(path)
    with pytest.raises(AdapterError, match="bytes must be a whole number"):
        AdapterRef.from_dict({**state["treeqa"]["adapter"], "bytes": float("inf")}, "x")
    result = run_cli("ask", "Who?", "--compiled", str(path))
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_9_a_symlinked_adapter_is_refused_without_reading_its_target(base, tmp_path):
    path = compiled_with_adapter(tmp_path / "run")
    outside = tmp_path / "elsewhere.gguf"
    (tmp_path / "run" / "adapter.gguf").rename(outside)
    outside.write_bytes(outside.read_bytes() + b"\0" * 12345)  # a size the message must not reveal
    (tmp_path / "run" / "adapter.gguf").symlink_to(outside)
    with pytest.raises(CompiledProgramError, match="symbolic link") as refused:
        load_program(path)
    assert f"{outside.stat().st_size:,}" not in str(refused.value)


def test_9_an_adapter_over_the_size_limit_says_so(base, tmp_path, monkeypatch):
    path = compiled_with_adapter(tmp_path)
    monkeypatch.setattr("treeqa.lm.adapter.MAX_ADAPTER_BYTES", 1000)
    with pytest.raises(CompiledProgramError, match="an adapter is at most 1,000") as refused:
        load_program(path)
    assert "recorded" not in str(refused.value)


def test_9_ask_with_an_adapter_refuses_an_endpoint_before_loading_the_model(base, engines, tmp_path):
    path = compiled_with_adapter(tmp_path)
    result = run_cli("ask", "Who?", "--compiled", str(path), "--lm", "openai/gpt-4o-mini")
    assert result.exit_code == 1
    assert "run it with --lm local" in result.output and len(result.output.strip().splitlines()) == 1
    assert engines == {}  # refused before the embedded model (and its adapter) were loaded


def test_9_ask_no_cache_reaches_the_adapters_predictor(base, engines, tmp_path):
    path = compiled_with_adapter(tmp_path)
    for _ in range(2):
        result = run_cli("ask", "Who is asked twice?", "--compiled", str(path), "--no-cache")
        assert result.exit_code == 0, result.output
    adapter = loaded_adapter(tmp_path / "adapter.gguf")
    assert len(engines[adapter].llama.calls) == 2  # both asks reached the adapter's engine


def test_9_serve_holds_an_adapters_predictor_to_lm_and_no_cache(base, engines, tmp_path):
    from treeqa.cli import load_served

    path = compiled_with_adapter(tmp_path)
    with pytest.raises(ValueError, match="run it with --lm local"):
        load_served(str(path), "direct", "hotpotqa", None, "openai/gpt-4o-mini", None)
    served = load_served(str(path), "direct", "hotpotqa", None, "local", None, cache=False)
    assert served.program.answer.lm.cache is False and served.program.answer.lm.adapter is not None
    endpoint = load_served(str(path), "direct", "hotpotqa", None, "openai/base", "http://127.0.0.1:9/v1",
                           cache=False, reader_model="openai/treeqa-reader")
    assert endpoint.program.answer.lm.model.endswith("/treeqa-reader")  # the server's adapter, not a local one
    assert endpoint.program.answer.lm.kwargs["api_base"] == "http://127.0.0.1:9/v1"
    result = run_cli("ask", "Who?", "--compiled", str(path), "--lm", "openai/base", "--api-base", "http://127.0.0.1:9/v1")
    assert result.exit_code == 1 and "--reader-model" in result.output and len(result.output.strip().splitlines()) == 1


def test_the_engine_loads_the_bytes_that_were_checked_not_a_file_swapped_after(base, engines, tmp_path):
    """Fourth round: a record and its checks hold only for the bytes they read; a compiled
    folder may be shared, so the engine loads a private copy of exactly those bytes."""
    path = compiled_with_adapter(tmp_path / "run")
    adapter = tmp_path / "run" / "adapter.gguf"
    checked = adapter.read_bytes()
    program = load_program(path)
    adapter.write_bytes(checked[:-100])  # swapped for a torn file once the checks passed
    (loaded,) = engines
    assert Path(loaded).read_bytes() == checked and Path(loaded) != adapter
    assert program.answer.lm.adapter == Path(loaded)
    Path(loaded).chmod(0o644)
    Path(loaded).write_bytes(b"tampered")  # a copy that no longer matches its name is written again
    adapter.write_bytes(checked)
    load_program(path)
    assert Path(loaded).read_bytes() == checked


def test_a_refused_adapter_is_named_as_the_user_knows_it_and_leaves_no_copy(base, tmp_path):
    torn = compiled_with_adapter(tmp_path / "torn", tear=100)
    with pytest.raises(CompiledProgramError) as refused:
        load_program(torn)
    assert str(tmp_path / "torn" / "adapter.gguf") in str(refused.value)
    assert not list((tmp_path / "cache" / "adapters").glob("*.gguf"))


def test_a_cache_dir_that_cannot_hold_the_copy_is_one_line(base, tmp_path, settings_env):
    path = compiled_with_adapter(tmp_path / "run")
    (tmp_path / "a-file").write_text("")
    settings_env(cache_dir=tmp_path / "a-file" / "cache")
    with pytest.raises(CompiledProgramError, match="cannot keep the adapter's private copy.*TREEQA_CACHE_DIR"):
        load_program(path)



def test_on_an_endpoint_a_compiled_reader_loads_with_no_embedded_model_installed(base, settings_env, tmp_path):
    """An endpoint-only user has no embedded model: the adapter's bytes are checked against the
    record, and the reader asks the served model; neither the model's header nor an engine is read."""
    import dspy

    from treeqa.lm import get_lm

    path = compiled_with_adapter(tmp_path / "run", program="rta")
    settings_env(model_path=tmp_path / "not-installed.gguf", cache_dir=tmp_path / "cache")
    endpoint = get_lm("openai/base", api_base="http://127.0.0.1:9/v1", api_key="k", cache=False)
    with dspy.context(lm=endpoint):
        served = load_program(path, retriever=FakeRetriever(), reader_model="openai/treeqa-reader")
        with pytest.raises(CompiledProgramError, match="--reader-model"):
            load_program(path, retriever=FakeRetriever())
    assert served.answer.lm.model.endswith("/treeqa-reader") and adapter_lms(served) == {}
    (tmp_path / "run" / "adapter.gguf").write_bytes(b"changed")  # the record still holds
    with dspy.context(lm=endpoint), pytest.raises(CompiledProgramError, match="adapter"):
        load_program(path, retriever=FakeRetriever(), reader_model="openai/treeqa-reader")


def test_ask_and_serve_on_an_endpoint_need_no_embedded_model_for_the_reader(base, settings_env, tmp_path):
    """The command line carries what load_program does: with --api-base and --reader-model the
    reader asks the served model and no embedded model is read, installed or not."""
    from tests.fakes.servers import FakeEndpoint
    from treeqa.cli import load_served

    path = compiled_with_adapter(tmp_path / "run")
    settings_env(model_path=tmp_path / "not-installed.gguf", cache_dir=tmp_path / "cache")
    asked = []

    def reply(n, body, headers):
        asked.append(body["model"])
        return 200, '{"answer": "Paris"}', 0

    with FakeEndpoint(reply) as endpoint:
        result = run_cli("ask", "Where?", "--compiled", str(path), "--lm", "openai/base", "--api-base", endpoint.url,
                         "--api-key", "k", "--reader-model", "openai/treeqa-reader", "--no-cache")
        served = load_served(str(path), "direct", "hotpotqa", None, "openai/base", endpoint.url, cache=False,
                             reader_model="openai/treeqa-reader")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Paris" and asked == ["treeqa-reader"]
    assert served.program.answer.lm.model.endswith("/treeqa-reader") and adapter_lms(served.program) == {}
