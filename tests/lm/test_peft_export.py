"""A GGUF adapter in PEFT's form: every tensor under PEFT's name with the same values, and a
config that names its rank, alpha, layers and projections."""

import json

import numpy as np
import pytest

from tests.fakes import tiny_lora_gguf
from treeqa.lm.adapter_check import AdapterError
from treeqa.lm.peft_export import peft_key, write_peft


def test_every_tensor_keeps_its_values_under_its_peft_name(tmp_path):
    from safetensors.numpy import load_file

    tensors = {"blk.3.attn_q.weight.lora_a": np.arange(4 * 32, dtype=np.float32).reshape(4, 32) / 100,
               "blk.3.attn_q.weight.lora_b": np.ones((32, 4), dtype=np.float32),
               "blk.3.ffn_down.weight.lora_a": np.full((4, 64), 0.5, dtype=np.float32),
               "blk.3.ffn_down.weight.lora_b": np.full((32, 4), 0.25, dtype=np.float32)}
    adapter = tiny_lora_gguf(tmp_path / "a.gguf", tensors=tensors, alpha=8.0) or tmp_path / "a.gguf"
    folder = write_peft(adapter, tmp_path / "peft")
    saved = load_file(str(folder / "adapter_model.safetensors"))
    assert set(saved) == {"base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight",
                          "base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight",
                          "base_model.model.model.layers.3.mlp.down_proj.lora_A.weight",
                          "base_model.model.model.layers.3.mlp.down_proj.lora_B.weight"}
    np.testing.assert_array_equal(saved["base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight"],
                                  tensors["blk.3.attn_q.weight.lora_a"])
    assert saved["base_model.model.model.layers.3.mlp.down_proj.lora_B.weight"].shape == (32, 4)
    config = json.loads((folder / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["layers_to_transform"]) == (4, 8.0, [3])
    assert config["target_modules"] == ["down_proj", "q_proj"] and config["peft_type"] == "LORA"


def test_a_file_that_is_no_adapter_is_refused(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"not gguf")
    with pytest.raises(AdapterError):
        write_peft(tmp_path / "x.gguf", tmp_path / "out")
    with pytest.raises(AdapterError):
        peft_key("blk.1.token_embd.weight.lora_a")


def test_peft_loads_the_folder_onto_the_model_with_the_same_weights(tmp_path):
    """The round trip a vLLM user depends on: PEFT itself reads the folder onto a Qwen2, and each
    LoRA factor it holds is the GGUF's."""
    pytest.importorskip("peft")
    import torch
    from peft import PeftModel

    from tests.fakes import tiny_lora_tensors, tiny_model

    tensors = tiny_lora_tensors(layers=(1, 3))
    tensors["blk.1.attn_k.weight.lora_a"] = np.linspace(-1, 1, 4 * 32, dtype=np.float32).reshape(4, 32)
    adapter = tiny_lora_gguf(tmp_path / "a.gguf", tensors=tensors) or tmp_path / "a.gguf"
    model = PeftModel.from_pretrained(tiny_model(), str(write_peft(adapter, tmp_path / "peft")))
    k_proj = model.base_model.model.model.layers[1].self_attn.k_proj
    torch.testing.assert_close(k_proj.lora_A["default"].weight.detach(),
                               torch.from_numpy(tensors["blk.1.attn_k.weight.lora_a"]))
    assert model.peft_config["default"].r == 4 and model.peft_config["default"].lora_alpha == 8.0
