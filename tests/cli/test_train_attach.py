"""`treeqa train attach`: a trained adapter put on a compiled program's reader gives a new compiled
file that records the adapter (size, sha256, predictors) and carries the source's compile record,
without loading an index or calling an LM."""

import hashlib
import json

import dspy
import pytest

from tests.fakes import FakeRetriever, run_cli, tiny_base_gguf, tiny_lora_gguf
from treeqa.evaluation.replay import check_same_search
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.programs.compiled import CompiledFile, adapter_lms, load_program, save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews


@pytest.fixture
def engines(scripted_engines, monkeypatch):
    """Scripted engines over a tiny base (tests/conftest.py), and no index: attaching loads none."""
    def no_index(*args, **kwargs):
        raise AssertionError("attaching an adapter loaded an index")

    monkeypatch.setattr("treeqa.retrievers.get_retriever", no_index)
    return scripted_engines


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


def test_attach_never_loads_the_model_and_names_where_a_predictor_is_missing(settings_env, tmp_path, monkeypatch):
    """Fifth round: `train attach` loaded the embedded model into llama.cpp (1.9 GB, and a traceback
    where it cannot load) to write a JSON; the real engine is made here, and loading is refused."""
    from treeqa.lm import LlamaEngine, _engine

    tiny_base_gguf(tmp_path / "base.gguf")
    settings_env(model_path=tmp_path / "base.gguf", cache_dir=tmp_path / "cache")
    monkeypatch.setattr(_engine, "_local_engines", {})

    def refuse(*args, **kwargs):
        raise AssertionError("train attach loaded the model")

    monkeypatch.setattr(LlamaEngine, "_load", staticmethod(refuse))
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: FakeRetriever())
    source = _compiled(tmp_path)
    adapter = tmp_path / "trained" / "adapter.gguf"
    adapter.parent.mkdir()
    tiny_lora_gguf(adapter)
    done = run_cli("train", "attach", str(source), str(adapter), str(tmp_path / "out" / "compiled.json"))
    assert done.exit_code == 0, done.output
    lacking = run_cli("train", "attach", str(source), str(adapter), str(tmp_path / "o2" / "compiled.json"),
                      "--predictor", "fuse")
    assert lacking.exit_code == 1 and f"{source}: the adapter is recorded for predictors" in lacking.output


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


def test_attach_sets_a_named_programs_settings_so_tor_reads_in_rtas_prompt(engines, tmp_path):
    adapter = tmp_path / "adapter.gguf"
    tiny_lora_gguf(adapter)
    out = tmp_path / "out" / "compiled.json"
    result = run_cli("train", "attach", "tor", str(adapter), str(out), "--predictor", "fuse",
                     "--param", "fusion=passages", "--param", "max_paragraph_chars=1000", "--param", "read_top=5")
    assert result.exit_code == 0, result.output
    recipe = json.loads(out.read_text())["treeqa"]
    assert recipe["params"] == {"fusion": "passages", "max_paragraph_chars": 1000, "read_top": 5}
    loaded = load_program(out, retriever=FakeRetriever())
    assert (loaded.fusion, loaded.max_paragraph_chars, loaded.read_top) == ("passages", 1000, 5)
    assert loaded.fuse.signature.equals(RetrieveThenAnswer(FakeRetriever()).answer.signature)
    assert set(adapter_lms(loaded)) == {"fuse"}
    bad = run_cli("train", "attach", "tor", str(adapter), str(tmp_path / "x.json"), "--param", "fusion=vote")
    assert bad.exit_code == 1 and "fusion" in bad.output and not (tmp_path / "x.json").exists()
    fixed = run_cli("train", "attach", str(_compiled(tmp_path)), str(adapter), str(tmp_path / "y.json"),
                    "--param", "k=3")
    assert fixed.exit_code == 1 and "keeps its search as compiled" in fixed.output
    lacking = run_cli("train", "attach", str(_compiled(tmp_path)), str(adapter), str(tmp_path / "z.json"),
                      "--param", "read_top=3")
    assert lacking.exit_code == 1 and "read_top: not a setting of rta" in lacking.output
    assert not (tmp_path / "z.json").exists()


def test_a_compiled_tor_given_a_new_fusion_keeps_its_search_and_reads_zero_shot(engines, tmp_path):
    adapter = tmp_path / "adapter.gguf"
    tiny_lora_gguf(adapter)
    tor = TreeOfReviews(FakeRetriever(), widths=(3, 2), hops=2)
    tor.fuse.demos = [dspy.Example(question="q", evidence=["Analysis: a"], answer="a")]
    tor.review.demos = [dspy.Example(question="q", paragraphs=["p"], relevant=True)]
    source = save_compiled(tor, tmp_path / "src.json", name="tor", dataset="hotpotqa", retriever="dense")
    out = tmp_path / "out" / "compiled.json"
    result = run_cli("train", "attach", str(source), str(adapter), str(out), "--predictor", "fuse",
                     "--param", "fusion=passages", "--param", "max_paragraph_chars=1000")
    assert result.exit_code == 0, result.output
    loaded = load_program(out, retriever=FakeRetriever())
    assert (loaded.fusion, loaded.max_paragraph_chars, loaded.widths, loaded.hops) == ("passages", 1000, (3, 2), 2)
    rta_reader = RetrieveThenAnswer(FakeRetriever()).answer
    assert loaded.fuse.demos == [] and loaded.fuse.signature.equals(rta_reader.signature)
    assert len(loaded.review.demos) == 1  # the search as compiled
    assert json.loads(out.read_text())["treeqa"]["adapter_added"]["reading"] == {"fusion": "passages",
                                                                                  "max_paragraph_chars": 1000}
    check_same_search(CompiledFile.read(source), CompiledFile.read(out))  # its recorded searches replay
