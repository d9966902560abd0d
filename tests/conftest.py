"""The shared fixtures. Helpers, doubles and data that tests import live in the `tests/fakes/`
package (a test module imports from it alone, never from here or from another test module)."""

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.fakes import (
    FIXTURE_ANSWERS,
    FIXTURE_DATA,
    MUSIQUE,
    RECORDS,
    FakeLlama,
    ScriptedEngine,
    generic_lm,
    hashing_embed,
    llama_server,
    tiny_base_gguf,
    use_lm,
)
from treeqa.lm._engine import LlamaEngine
from treeqa.settings import get_settings

# what `treeqa data get` fetched on this machine must not stand in for a test's missing files
os.environ.setdefault("TREEQA_USER_DATA_DIR", tempfile.mkdtemp(prefix="treeqa-tests-user-data-"))
get_settings.cache_clear()  # importing treeqa above read the settings once already


@pytest.fixture(autouse=True)
def no_real_encoder(request, monkeypatch):
    """No fast test loads MiniLM: what a program embeds with when it is given no `embed_fn` (the
    recall re-ranking, a path judge) is the stand-in `hashing_embed`. Tests marked `integration`
    keep the real encoder; a test that wants another one patches the same names itself (its
    monkeypatch runs after this) or passes `embed_fn`."""
    if request.node.get_closest_marker("integration"):
        return
    monkeypatch.setattr("treeqa.programs.review_run.default_embed", hashing_embed)
    monkeypatch.setattr("treeqa.programs.judged.default_embed", hashing_embed)


@pytest.fixture
def settings_env(monkeypatch):
    """Set TREEQA_* variables for one test; the settings object is rebuilt around it."""

    def apply(**values):
        for key, value in values.items():
            monkeypatch.setenv(f"TREEQA_{key.upper()}", str(value))
        get_settings.cache_clear()
        return get_settings()

    yield apply
    get_settings.cache_clear()


@pytest.fixture
def fixture_data(settings_env, tmp_path):
    """The hand-written files in the official layouts, with a throwaway cache dir."""
    return settings_env(data_dir=FIXTURE_DATA, cache_dir=tmp_path / "cache")


@pytest.fixture
def scripted(fixture_data, monkeypatch):
    """The fixture data, and every LM treeqa builds answering any signature (`generic_lm`) with
    `FIXTURE_ANSWERS`; returns that LM (its engine, `lm._engine_spec`, records the calls). A module
    may define its own `scripted` with other answers (test_optimize.py does)."""
    lm = generic_lm(FIXTURE_ANSWERS)
    use_lm(monkeypatch, lm)
    return lm


@pytest.fixture
def train(settings_env, tmp_path):
    """The annotated training sets: `RECORDS` as HotpotQA's and `MUSIQUE` as MuSiQue's train
    split, in a throwaway data dir; returns both loaded."""
    from treeqa.data import load_split

    (tmp_path / "hotpotqa").mkdir()
    (tmp_path / "hotpotqa" / "hotpot_train_subset.json").write_text(json.dumps(RECORDS))
    (tmp_path / "musique").mkdir()
    (tmp_path / "musique" / "musique_ans_train_subset.jsonl").write_text(json.dumps(MUSIQUE) + "\n")
    settings_env(data_dir=tmp_path, cache_dir=tmp_path / "cache")
    return load_split("hotpotqa", "train"), load_split("musique", "train")


@pytest.fixture(scope="module")
def real_hotpot():
    """The embedded LM (uncached), the dense retriever over the pooled HotpotQA corpus, and the
    first 3 questions of the seeded dev sample: what the integration tests run on."""
    from treeqa.data import load_examples
    from treeqa.lm import get_lm
    from treeqa.retrievers import get_retriever

    return get_lm("local", cache=False), get_retriever("hotpotqa", "dense"), load_examples("hotpotqa", "dev", n=3)


@pytest.fixture(scope="module")
def llama_server_url():
    """One real server for a test module (see `llama_server`)."""
    with llama_server() as url:
        yield url


@pytest.fixture
def base(settings_env, tmp_path):
    """The tiny model's base GGUF as the embedded model (adapters record its hash)."""
    path = tiny_base_gguf(tmp_path / "base.gguf")
    settings_env(model_path=path, cache_dir=tmp_path / "cache")
    return path


@pytest.fixture
def scripted_engines(monkeypatch, settings_env, tmp_path):
    """Scripted embedded engines, one per adapter (each answering "x"); the base model a tiny GGUF
    that adapters are checked against. Returns adapter -> engine, as the tests made them."""
    tiny_base_gguf(tmp_path / "base.gguf")
    settings_env(model_path=tmp_path / "base.gguf", cache_dir=tmp_path / "cache")
    made = {}

    def fake_local_engine(**overrides):
        adapter = overrides.get("adapter")
        made.setdefault(adapter, ScriptedEngine(lambda call: {"answer": "x"}))
        made[adapter].adapter = Path(adapter) if adapter else None
        return made[adapter]

    monkeypatch.setattr("treeqa.lm.local_engine", fake_local_engine)
    return made


@pytest.fixture
def engines(monkeypatch):
    """Embedded engines without llama.cpp, one per adapter: a LlamaEngine over a FakeLlama that
    answers in JSON, recording its calls."""
    made = {}

    def fake_local_engine(**overrides):
        adapter = overrides.get("adapter")
        if adapter not in made:
            made[adapter] = LlamaEngine(llama=FakeLlama('{"answer": "Paris"}'), kv_cache_mb=0, adapter=adapter)
        return made[adapter]

    monkeypatch.setattr("treeqa.lm.local_engine", fake_local_engine)
    monkeypatch.setattr(LlamaEngine, "_grammar_for", lambda self, response_format: None)
    return made
