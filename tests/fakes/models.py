"""A tiny model for the LoRA tests: the 1.5B model's architecture (Qwen2) at a test's size,
with a word-level tokenizer that has ChatML's template."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.fakes.retrievers import FakeRetriever
from treeqa.lm import base_model_sha256
from treeqa.lm.adapter import AdapterRef
from treeqa.programs import build_program
from treeqa.programs.compiled import save_compiled

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ["system", "user", "assistant", "question", "passages", "answer", "paris", "rome", "capital", "of",
         "france", "italy", "what", "is", "the", "{", "}", ":", '"', "\n"]


def tiny_tokenizer():
    """A word-level tokenizer with ChatML's template, for the tiny model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<|im_start|>", "<|im_end|>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    fast.chat_template = CHATML
    return fast


def tiny_model(layers: int = 4, seed: int = 0):
    """A random Qwen2 of 4 layers, 32 wide: the 1.5B model's architecture at a test's size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=False, attn_implementation="sdpa")
    model = Qwen2ForCausalLM(config).float().eval()
    with torch.no_grad():  # at the default 0.02 a 32-wide head cannot move a logit by more than ~1
        model.lm_head.weight.normal_(0, 1.0)
    return model


# the tiny model's projections as llama.cpp names them: (in, out), ggml's order (4 heads of 8, 2 kv heads)
TINY_PROJECTIONS = {"attn_q": (32, 32), "attn_k": (32, 16), "attn_v": (32, 16), "attn_output": (32, 32),
                    "ffn_gate": (32, 64), "ffn_up": (32, 64), "ffn_down": (64, 32)}


def write_gguf(path, tensors: dict, fields: dict, architecture: str = "qwen2"):
    """A GGUF file of numpy `tensors` (each numpy (rows, cols) is ggml's (cols, rows)) and string
    or float `fields`, written with gguf's own writer."""
    import gguf

    fields = dict(fields)
    writer = gguf.GGUFWriter(str(path), fields.pop("general.architecture", architecture))
    for key, value in fields.items():
        (writer.add_string if isinstance(value, str) else writer.add_float32)(key, value)
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_base_gguf(path, layers: int = 4):
    """The tiny model as a base GGUF: its adaptable weights (zeros) with the tiny model's widths."""
    import numpy as np

    tensors = {f"blk.{layer}.{name}.weight": np.zeros((n_out, n_in), dtype=np.float32)
               for layer in range(layers) for name, (n_in, n_out) in TINY_PROJECTIONS.items()}
    tensors["token_embd.weight"] = np.zeros((32, 32), dtype=np.float32)
    return write_gguf(path, tensors, {"general.type": "model"})


def tiny_lora_tensors(layers=(3,), rank: int = 4, dtype: str = "float32") -> dict:
    """lora_a (rank x in) and lora_b (out x rank) for every projection of `layers` of the tiny model."""
    import numpy as np

    out = {}
    for layer in layers:
        for name, (n_in, n_out) in TINY_PROJECTIONS.items():
            out[f"blk.{layer}.{name}.weight.lora_a"] = np.full((rank, n_in), 0.01, dtype=dtype)
            out[f"blk.{layer}.{name}.weight.lora_b"] = np.full((n_out, rank), 0.01, dtype=dtype)
    return out


def tiny_lora_gguf(path, tensors: dict | None = None, alpha: float = 8.0, **fields):
    """An adapter GGUF in llama.cpp's LoRA layout (for the tiny base unless `tensors` say otherwise)."""
    meta = {"general.type": "adapter", "adapter.type": "lora", "adapter.lora.alpha": alpha, **fields}
    return write_gguf(path, tiny_lora_tensors() if tensors is None else tensors, meta)


def loaded_adapter(adapter: Path) -> str:
    """Where the engine loads `adapter` from: its private copy under the (test's) cache dir."""
    from treeqa.lm.adapter import sha256_of
    from treeqa.settings import get_settings

    return str(get_settings().cache_dir / "adapters" / f"{sha256_of(adapter)}.gguf")


def compiled_with_adapter(folder: Path, program: str = "direct", tear: int = 0) -> Path:
    """A compiled program whose "answer" predictor is recorded to answer through an adapter for
    the tiny base; `tear` bytes are cut off the adapter before it is recorded (so the record
    matches the torn file, as a file that arrived with it would)."""
    built = build_program(program, FakeRetriever()) if program == "rta" else build_program(program)
    path = save_compiled(built, folder / "compiled.json", name=program, dataset="hotpotqa", retriever="dense")
    adapter = tiny_lora_gguf(folder / "adapter.gguf")
    if tear:
        adapter.write_bytes(adapter.read_bytes()[:-tear])
    state = json.loads(path.read_text())
    state["treeqa"]["adapter"] = AdapterRef.of(adapter, folder, base_model_sha256(), ["answer"]).to_dict()
    path.write_text(json.dumps(state))
    return path


def write_released(folder: Path, recipe: dict | None = None, base: str | None = None) -> Path:
    """A released reader's folder as `train_reader` and the release write it."""
    from treeqa.teleprompt.trained_reader import reads_settings_wanted
    from treeqa.train.reader import ReaderRecipe

    folder.mkdir(parents=True, exist_ok=True)
    adapter = tiny_lora_gguf(folder / "adapter.gguf") or folder / "adapter.gguf"
    record = {"recipe": recipe or ReaderRecipe().to_dict(), "base_sha256": base or base_model_sha256(),
              "reads": {"sha256": "ab" * 32, "settings": reads_settings_wanted(ReaderRecipe()), "train_reads": 1073,
                        "validation_reads": 64, "counts": {}},
              "adapter": {"file": "adapter.gguf", "sha256": hashlib.sha256(adapter.read_bytes()).hexdigest()},
              "training": {"best": {"step": 768, "val_loss": 0.35}}}
    (folder / "reader.json").write_text(json.dumps(record))
    return folder
