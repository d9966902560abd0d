"""The LoRA path on the real embedded model: llama.cpp loads the adapters treeqa writes for it
(an adapter whose update is zero answers exactly as the base model, a non-zero one does not),
and the training prompt is token for token the prompt llama.cpp serves."""

import pytest

torch = pytest.importorskip("torch")

from treeqa.lm import TrainableJSONAdapter, model_path  # noqa: E402
from treeqa.lm._engine import LlamaEngine  # noqa: E402
from treeqa.lm.adapter import read_adapter, write_adapter  # noqa: E402

pytestmark = pytest.mark.integration
PROMPT = [{"role": "user", "content": "Name the capital of France in one word."}]


def base_shapes(layer: int) -> dict[str, tuple[int, int]]:
    """(in, out) of the layer's attention and MLP projections, read from the GGUF itself."""
    import gguf

    reader = gguf.GGUFReader(str(model_path()))
    names = {"q_proj": "attn_q", "v_proj": "attn_v", "down_proj": "ffn_down"}
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors if t.name.startswith(f"blk.{layer}.")}
    return {proj: shapes[f"blk.{layer}.{gguf_name}.weight"][:2] for proj, gguf_name in names.items()}


def lora_state(layer: int, scale: float) -> dict:
    torch.manual_seed(0)
    state = {}
    for proj, (n_in, n_out) in base_shapes(layer).items():
        part = "self_attn" if proj != "down_proj" else "mlp"
        key = f"base_model.model.model.layers.{layer}.{part}.{proj}"
        state[f"{key}.lora_A.weight"] = torch.randn(8, n_in) * 0.05
        state[f"{key}.lora_B.weight"] = torch.randn(n_out, 8) * scale
    return state


def answer(engine: LlamaEngine) -> str:
    out = engine.llama.create_chat_completion(messages=PROMPT, temperature=0.0, max_tokens=8)
    return out["choices"][0]["message"]["content"]


def test_llama_cpp_loads_treeqas_adapters(tmp_path):
    base = answer(LlamaEngine(kv_cache_mb=0))
    zero = write_adapter(lora_state(27, 0.0), tmp_path / "zero.gguf", alpha=16)
    loud = write_adapter(lora_state(27, 2.0), tmp_path / "loud.gguf", alpha=16)
    assert read_adapter(zero)["shapes"]["blk.27.attn_q.weight.lora_a"] == (1536, 8)
    assert answer(LlamaEngine(kv_cache_mb=0, adapter=zero)) == base  # a zero update changes nothing
    assert answer(LlamaEngine(kv_cache_mb=0, adapter=loud)) != base  # a large one is applied


def test_training_prompt_is_the_prompt_llama_cpp_serves():
    from transformers import AutoTokenizer

    from treeqa.lm.lora import chat_tokens
    from treeqa.signatures.answer import AnswerFromPassages

    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    chat = TrainableJSONAdapter().format_finetune_data(
        AnswerFromPassages, [], {"question": "Who wrote Hamlet?", "passages": ["Hamlet: a play by Shakespeare."]},
        {"answer": "William Shakespeare"})
    trained = chat_tokens(tokenizer, chat["messages"])
    engine = LlamaEngine(kv_cache_mb=0)
    out = engine.llama.create_chat_completion(messages=chat["messages"][:-1], temperature=0.0, max_tokens=1)
    assert out["usage"]["prompt_tokens"] == len(trained.prompt)
    assert engine.llama.input_ids[: len(trained.prompt)].tolist() == trained.prompt


ENGINE_SCRIPT = """
import sys
from treeqa.lm._engine import LlamaEngine
from treeqa.lm.adapter import AdapterError
try:
    engine = LlamaEngine(kv_cache_mb=0, adapter=sys.argv[1])
except AdapterError as exc:
    print(exc)
    sys.exit(1)
engine.llama.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
print("answered")
"""


def test_an_adapter_the_model_cannot_take_is_refused_not_a_crash(tmp_path):
    """A torn adapter, and one built for a 2048-wide model, loaded and then ended the first decode
    in SIGSEGV (exit 139) before they were checked. Now each is one line and exit 1, at the
    engine's door and through a compiled file whose record matches them (`treeqa ask`)."""
    import json
    import subprocess
    import sys

    from treeqa.lm import base_model_sha256
    from treeqa.lm.adapter import AdapterRef
    from treeqa.programs import build_program
    from treeqa.programs.compiled import save_compiled

    torn = write_adapter(lora_state(27, 0.5), tmp_path / "torn" / "adapter.gguf", alpha=16)
    torn.write_bytes(torn.read_bytes()[:-4096])
    wide = {f"base_model.model.model.layers.27.self_attn.q_proj.lora_{ab}.weight": torch.randn(*shape) * 0.05
            for ab, shape in (("A", (8, 2048)), ("B", (2048, 8)))}
    wide = write_adapter(wide, tmp_path / "wide" / "adapter.gguf", alpha=16)
    for adapter, refusal in ((torn, "cut short"), (wide, "1536 in and 1536 out")):
        engine = subprocess.run([sys.executable, "-c", ENGINE_SCRIPT, str(adapter)], capture_output=True,
                                text=True, timeout=300)
        assert engine.returncode == 1, engine.stdout + engine.stderr
        assert refusal in engine.stdout and len(engine.stdout.strip().splitlines()) == 1

        path = save_compiled(build_program("direct"), adapter.parent / "compiled.json", name="direct",
                             dataset="hotpotqa", retriever="dense")
        state = json.loads(path.read_text())
        state["treeqa"]["adapter"] = AdapterRef.of(adapter, adapter.parent, base_model_sha256(), ["answer"]).to_dict()
        path.write_text(json.dumps(state))
        ask = subprocess.run([sys.executable, "-c", "from treeqa.cli import main; main()", "ask", "Who wrote Hamlet?",
                              "--compiled", str(path)],
                             capture_output=True, text=True, timeout=300)
        assert ask.returncode == 1, ask.stdout + ask.stderr
        assert refusal in ask.stderr and len(ask.stderr.strip().splitlines()) == 1
