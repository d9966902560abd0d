"""An adapter is compared with the base model before llama.cpp reads it (benchmarks/faults.md,
fourth round #1): a torn file, one shaped for another model, unpaired or mismatched ranks, and
tensors of another type are one AdapterError line, at the engine's one door as well. The files
are small GGUFs written with gguf's own writer, against a base GGUF of the tiny model's widths."""

import numpy as np
import pytest

from tests.fakes import tiny_base_gguf, tiny_lora_gguf, tiny_lora_tensors
from treeqa.lm import adapter_check
from treeqa.lm.adapter import AdapterError
from treeqa.lm.adapter_check import check_adapter


@pytest.fixture
def base(tmp_path):
    return tiny_base_gguf(tmp_path / "base.gguf")


def test_an_adapter_made_for_the_base_passes_in_f32_and_f16(base, tmp_path):
    check_adapter(tiny_lora_gguf(tmp_path / "a.gguf"), base)
    check_adapter(tiny_lora_gguf(tmp_path / "h.gguf", tiny_lora_tensors(layers=(0, 3), dtype="float16")), base)


@pytest.mark.parametrize("cut", [1, 100, 2000])
def test_a_torn_adapter_is_refused(base, tmp_path, cut):
    path = tiny_lora_gguf(tmp_path / "a.gguf")
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(AdapterError, match="cut short|not a whole GGUF"):
        check_adapter(path, base)


def test_a_file_that_is_not_gguf_or_claims_huge_counts_is_refused_before_parsing(base, tmp_path):
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf at all")
    with pytest.raises(AdapterError, match="not a GGUF file"):
        check_adapter(tmp_path / "junk.gguf", base)
    (tmp_path / "huge.gguf").write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (10**9).to_bytes(8, "little")
                                         + (0).to_bytes(8, "little"))
    with pytest.raises(AdapterError, match="lists 1,000,000,000 tensors"):
        check_adapter(tmp_path / "huge.gguf", base)


def _with(tensors: dict, **changes) -> dict:
    return {**tensors, **changes}


GOOD = tiny_lora_tensors()


@pytest.mark.parametrize(("tensors", "match"), [
    # another model's widths: 2048 in where the base's attn_q takes 32
    (_with(GOOD, **{"blk.3.attn_q.weight.lora_a": np.zeros((4, 2048), np.float32)}), "32 in and 32 out"),
    (_with(GOOD, **{"blk.3.ffn_down.weight.lora_b": np.zeros((64, 4), np.float32)}), "64 in and 32 out"),
    # ranks that are not a pair
    (_with(GOOD, **{"blk.3.attn_v.weight.lora_b": np.zeros((16, 8), np.float32)}), "ranks differ"),
    ({k: v for k, v in GOOD.items() if k != "blk.3.attn_k.weight.lora_b"}, "lora_a without its pair"),
    # a layer or a weight the base does not have
    (_with(GOOD, **{"blk.9.attn_q.weight.lora_a": np.zeros((4, 32), np.float32)}), "adapts no weight"),
    (_with(GOOD, **{"output.weight.lora_a": np.zeros((4, 32), np.float32)}), "adapts no weight"),
    # tensors of another type
    (_with(GOOD, **{"blk.3.attn_q.weight.lora_a": np.zeros((4, 32), np.int8)}), "I8; an adapter holds F32 or F16"),
])
def test_an_adapter_shaped_for_another_model_is_refused(base, tmp_path, tensors, match):
    with pytest.raises(AdapterError, match=match):
        check_adapter(tiny_lora_gguf(tmp_path / "a.gguf", tensors), base)


@pytest.mark.parametrize(("fields", "match"), [
    ({"general.type": "model"}, "not a LoRA adapter"),
    ({"adapter.type": "ia3"}, "not a LoRA adapter"),
    ({"general.architecture": "llama"}, "architecture 'llama'; the base model is 'qwen2'"),
    ({"alpha": float("nan")}, "alpha must be a positive finite number"),
    ({"alpha": -1.0}, "alpha must be a positive finite number"),
])
def test_an_adapter_of_another_type_architecture_or_alpha_is_refused(base, tmp_path, fields, match):
    alpha = fields.pop("alpha", 8.0)
    with pytest.raises(AdapterError, match=match):
        check_adapter(tiny_lora_gguf(tmp_path / "a.gguf", alpha=alpha, **fields), base)


def test_the_base_model_is_read_once_per_file(base, tmp_path, monkeypatch):
    reads = []
    inner = adapter_check._read_base
    monkeypatch.setattr(adapter_check, "_read_base", lambda path: reads.append(path) or inner(path))
    monkeypatch.setattr(adapter_check, "_bases", {})
    for i in range(3):
        check_adapter(tiny_lora_gguf(tmp_path / f"a{i}.gguf"), base)
    assert len(reads) == 1
    tiny_base_gguf(tmp_path / "other.gguf", layers=2)
    with pytest.raises(AdapterError, match="adapts no weight"):  # layer 3 is not in a 2-layer base
        check_adapter(tmp_path / "a0.gguf", tmp_path / "other.gguf")
    assert len(reads) == 2


def test_the_engine_refuses_a_torn_adapter_before_llama_cpp_reads_it(base, tmp_path, monkeypatch):
    """`LlamaEngine._load` is the one door to llama.cpp's reader (every engine, and a reload)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from treeqa.lm._engine import LlamaEngine

    opened = []
    monkeypatch.setattr(llama_cpp, "Llama", lambda **kwargs: opened.append(kwargs))
    torn = tiny_lora_gguf(tmp_path / "a.gguf")
    torn.write_bytes(torn.read_bytes()[:-100])
    with pytest.raises(AdapterError, match="cut short|not a whole GGUF"):
        LlamaEngine(model_path=base, kv_cache_mb=0, adapter=torn)
    assert opened == []


def test_the_base_header_is_skimmed_as_ggufs_reader_reads_it(base):
    import gguf

    reader = gguf.GGUFReader(str(base))
    expected = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors if t.name.startswith("blk.")}
    targets = adapter_check._read_base(base)
    assert targets.architecture == "qwen2" and targets.shapes == expected
