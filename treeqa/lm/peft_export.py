"""A GGUF LoRA adapter written in PEFT's form (`adapter_config.json` + `adapter_model.safetensors`),
for servers that load adapters that way: vLLM (`--enable-lora --lora-modules NAME=DIR`) and
others. llama.cpp's server takes the GGUF itself (`--lora FILE`). The weights are the GGUF's, name
for name: nothing is trained or rounded again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from treeqa.lm.adapter import read_adapter
from treeqa.lm.adapter_check import GGUF_NAMES, AdapterError

PEFT_NAMES = {gguf: peft for peft, gguf in GGUF_NAMES.items()}
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
# what the embedded GGUF is a quantisation of: the name a server loads the base model by
BASE_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"


def peft_key(gguf_name: str) -> str:
    """'blk.20.attn_q.weight.lora_a' -> PEFT's 'base_model.model.model.layers.20.self_attn.q_proj.lora_A.weight'."""
    try:
        block, layer, kind, _, which = gguf_name.split(".")
        proj = PEFT_NAMES[kind]
    except (ValueError, KeyError):
        raise AdapterError(f"not a LoRA tensor of a known projection: {gguf_name}") from None
    if block != "blk" or which not in ("lora_a", "lora_b"):
        raise AdapterError(f"not a LoRA tensor of a known projection: {gguf_name}")
    part = "self_attn" if proj in ATTENTION else "mlp"
    return f"base_model.model.model.layers.{int(layer)}.{part}.{proj}.lora_{which[-1].upper()}.weight"


def write_peft(adapter: str | Path, folder: str | Path, base_model: str = BASE_MODEL) -> Path:
    """Write `adapter` (a GGUF LoRA adapter) into `folder` in PEFT's form; returns the folder."""
    # gguf and safetensors load when an adapter is exported, not when the CLI imports this module
    import gguf
    from safetensors.numpy import save_file

    meta = read_adapter(adapter)  # refuses what is not a LoRA adapter
    tensors = {peft_key(t.name): np.ascontiguousarray(t.data) for t in gguf.GGUFReader(str(adapter)).tensors}
    ranks = {v.shape[0] for k, v in tensors.items() if ".lora_A." in k}
    if len(ranks) != 1:
        raise AdapterError(f"{adapter}: its LoRA factors have ranks {sorted(ranks)}, not one")
    layers = sorted({int(k.split(".layers.")[1].split(".")[0]) for k in tensors})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model,
              "r": ranks.pop(), "lora_alpha": float(meta["alpha"]), "lora_dropout": 0.0, "bias": "none",
              "fan_in_fan_out": False, "layers_to_transform": layers,
              "target_modules": sorted({k.split(".")[-3] for k in tensors}), "inference_mode": True}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder
