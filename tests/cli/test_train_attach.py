"""`treeqa train attach`: a trained adapter put on a compiled program's reader gives a new compiled
file that records the adapter (size, sha256, predictors) and carries the source's compile record,
without loading an index or calling an LM."""

import hashlib
import json
from pathlib import Path

import pytest

from tests.fakes import FakeRetriever, ScriptedEngine, run_cli, tiny_base_gguf, tiny_lora_gguf
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.programs.compiled import adapter_lms, load_program, save_compiled


@pytest.fixture
def engines(monkeypatch, settings_env, tmp_path):
    """The embedded engine is a scripted one (one per adapter); the base model a tiny GGUF that
    adapters are checked against."""
    tiny_base_gguf(tmp_path / "base.gguf")
    settings_env(model_path=tmp_path / "base.gguf", cache_dir=tmp_path / "cache")
    made = {}

    def fake_local_engine(**overrides):
        adapter = overrides.get("adapter")
        made.setdefault(adapter, ScriptedEngine(lambda call: {"answer": "x"}))
        made[adapter].adapter = Path(adapter) if adapter else None
        return made[adapter]

    def no_index(*args, **kwargs):
        raise AssertionError("attaching an adapter loaded an index")

    monkeypatch.setattr("treeqa.lm.local_engine", fake_local_engine)
    monkeypatch.setattr("treeqa.retrievers.get_retriever", no_index)
    return made


def _compiled(tmp_path):
    return save_compiled(RetrieveThenAnswer(FakeRetriever(), k=2), tmp_path / "src" / "compiled.json", name="rta",
                         dataset="hotpotqa", retriever="dense", extra={"compile": {"optimizer": "reader"}})


def test_attach_writes_a_compiled_file_that_names_the_adapter_on_the_reader(engines, tmp_path):
    source = _compiled(tmp_path)
    adapter = tmp_path / "trained" / "adapter.gguf"
    adapter.parent.mkdir()
    tiny_lora_gguf(adapter)
    out = tmp_path / "out" / "compiled.json"
    result = run_cli("train", "attach", str(source), str(adapter), str(out))
    assert result.exit_code == 0, result.output
    assert "rta with adapter.gguf on answer" in result.output
    recipe = json.loads(out.read_text())["treeqa"]
    sha = hashlib.sha256(adapter.read_bytes()).hexdigest()
    assert recipe["adapter"]["file"] == f"adapter-{sha[:12]}.gguf"
    assert recipe["adapter"]["sha256"] == sha and recipe["adapter"]["bytes"] == adapter.stat().st_size
    assert recipe["adapter"]["predictors"] == ["answer"]  # the program's reader
    assert (out.parent / recipe["adapter"]["file"]).read_bytes() == adapter.read_bytes()  # copied beside it
    assert recipe["compile"] == {"optimizer": "reader"}
    assert recipe["adapter_added"] == {"from": str(source), "adapter": "adapter.gguf", "predictors": ["answer"]}
    loaded = load_program(out, retriever=FakeRetriever())
    assert set(adapter_lms(loaded)) == {"answer"}
    assert "adapter" not in json.loads(source.read_text())["treeqa"]  # the source is left as it was


def test_attach_refuses_a_predictor_the_program_lacks_in_one_line(engines, tmp_path):
    source = _compiled(tmp_path)
    adapter = tmp_path / "adapter.gguf"
    adapter.write_bytes(b"lora weights")
    out = tmp_path / "out" / "compiled.json"
    result = run_cli("train", "attach", str(source), str(adapter), str(out), "--predictor", "fuse")
    assert result.exit_code == 1 and "predictors the program lacks: fuse" in result.output
    assert not out.exists()
    missing = run_cli("train", "attach", str(source), str(tmp_path / "none.gguf"), str(out))
    assert missing.exit_code == 1 and "no such adapter" in missing.output


def test_attach_puts_an_adapter_on_a_zero_shot_program_named_by_its_name(engines, tmp_path):
    adapter = tmp_path / "trained" / "adapter.gguf"
    adapter.parent.mkdir()
    tiny_lora_gguf(adapter)
    (adapter.parent / "training.json").write_text(json.dumps({
        "recipe": {"rank": 16, "top_layers": 8}, "report": {"examples": 1010, "steps_done": 752, "steps_total": 1010,
                                                            "best": {"step": 752, "val_loss": 0.17}, "curve": [],
                                                            "losses": [0.3] * 752}}))
    out = tmp_path / "out" / "compiled.json"
    result = run_cli("train", "attach", "rta", str(adapter), str(out), "--dataset", "2wikimultihopqa")
    assert result.exit_code == 0, result.output
    recipe = json.loads(out.read_text())["treeqa"]
    assert (recipe["program"], recipe["dataset"], recipe["retriever"]) == ("rta", "2wikimultihopqa", "dense")
    assert recipe["compile"] == {"optimizer": "none (zero-shot)"} and recipe["adapter"]["predictors"] == ["answer"]
    added = recipe["adapter_added"]
    assert added["from"] == "rta (zero-shot)" and added["training"]["steps_done"] == 752
    assert "losses" not in added["training"]  # the figures, not every loss
    loaded = load_program(out, retriever=FakeRetriever())
    assert set(adapter_lms(loaded)) == {"answer"} and (loaded.k, loaded.passage_chars) == (5, 1000)
    unknown = run_cli("train", "attach", "magic", str(adapter), str(tmp_path / "x.json"))
    assert unknown.exit_code == 1 and "neither a compiled file nor a program" in unknown.output
