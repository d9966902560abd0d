"""What a LoRA training example costs on this machine, by recipe, and what an adapter costs a
question at inference; prints YAML (commit it as benchmarks/lora_train.md's figures).

    python benchmarks/lora_train.py CHATS.jsonl [--examples 3] [--tops 2,4,8]

For each example of CHATS (the first N; e.g. a training run's train-data.jsonl): the lower
layers' pass (computed once per example and cached on disk), then one forward and backward
through the top K layers with LoRA (every epoch), for each K; the adapter's size for each K;
peak RSS. Then the embedded engine answers the same prompts with and without an adapter
(llama.cpp, greedy, 2 threads): seconds and prompt tokens a second. Run it alone: the figures
are CPU time.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chats", type=Path)
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--tops", default="2,4,8")
    parser.add_argument("--top-dtypes", default="float32",
                        help="what the trained layers compute in, e.g. float32,bfloat16")
    parser.add_argument("--lower-dtype", default="float32")
    args = parser.parse_args()

    import torch

    from treeqa.lm.adapter import write_adapter
    from treeqa.lm.lora import LoraRecipe, LoraTrainer, chat_tokens, peak_rss_gb
    from treeqa.lm.provider import load_base, read_chats

    torch.set_num_threads(2)
    chats = read_chats(args.chats)[: args.examples]
    started = time.perf_counter()
    tokenizer, model = load_base()
    out = {"machine": {"cpu": cpu_name(), "threads": 2}, "load_seconds": round(time.perf_counter() - started, 1),
           "rss_after_load_gb": round(peak_rss_gb(), 2)}
    examples = [chat_tokens(tokenizer, c["messages"]) for c in chats]
    out["tokens"] = [len(ex) for ex in examples]
    rows = []
    trainer = None
    recipes = [(int(t), d) for t in args.tops.split(",") for d in args.top_dtypes.split(",")]
    for top, top_dtype in recipes:
        if trainer is not None:  # peft wraps the model in place: unwrap before the next recipe
            model = trainer.model.unload()
        work = Path(tempfile.mkdtemp())
        recipe = LoraRecipe(top_layers=top, top_dtype=top_dtype, lower_dtype=args.lower_dtype)
        trainer = LoraTrainer(model, tokenizer, recipe, "bench", work, cache_dir=work / "c")
        lower, step = [], []
        for ex in examples:
            t0 = time.perf_counter()
            hidden = trainer.lower_hidden(ex)
            t1 = time.perf_counter()
            trainer.answer_loss(ex, hidden).backward()
            t2 = time.perf_counter()
            lower.append(t1 - t0)
            step.append(t2 - t1)
            trainer.model.zero_grad()
        adapter = write_adapter(trainer.lora_state(), work / "adapter.gguf", alpha=32)
        rows.append({"top_layers": top, "top_dtype": top_dtype, "lower_dtype": args.lower_dtype,
                     "loss": round(float(trainer.answer_loss(examples[0], trainer.lower_hidden(examples[0]))), 4),
                     "lower_pass_s": round(sum(lower) / len(lower), 1),
                     "train_step_s": round(sum(step) / len(step), 1),
                     "first_epoch_s": round((sum(lower) + sum(step)) / len(step), 1),
                     "adapter_mb": round(adapter.stat().st_size / 2**20, 1),
                     "trainable_params_m": round(sum(p.numel() for p in trainer.trainable()) / 1e6, 2)})
        print(rows[-1], file=sys.stderr)
    out["recipes"] = rows
    out["peak_rss_gb"] = round(peak_rss_gb(), 2)
    del trainer, model
    out["inference"] = inference(chats, adapter)
    print(yaml.safe_dump(out, sort_keys=False))


def inference(chats: list[dict], adapter: Path) -> dict:
    """Seconds per answer of the embedded engine on the chats' prompts, without and with an adapter."""
    from treeqa.lm import LlamaEngine

    def timed(engine) -> tuple[float, float]:
        seconds = tokens = 0.0
        for chat in chats:
            messages = chat["messages"][:-1]
            t0 = time.perf_counter()
            out = engine.llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=24)
            seconds += time.perf_counter() - t0
            tokens += out["usage"]["prompt_tokens"]
        return seconds / len(chats), tokens / seconds

    base = LlamaEngine(kv_cache_mb=0)
    plain_s, plain_tps = timed(base)
    del base
    with_adapter = LlamaEngine(kv_cache_mb=0, adapter=adapter)
    lora_s, lora_tps = timed(with_adapter)
    return {"without_adapter_s": round(plain_s, 2),
            "with_adapter_s": round(lora_s, 2), "prompt_tok_s_without": round(plain_tps, 1),
            "prompt_tok_s_with": round(lora_tps, 1)}


if __name__ == "__main__":
    main()
