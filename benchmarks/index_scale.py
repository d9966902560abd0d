"""Dense indexes at scale on this machine, and what Wikipedia (21M passages) would take.

1. A real corpus: every paragraph of the shared data (HotpotQA, 2Wiki, MuSiQue, the NQ gold
   passages and the Wikipedia leads), deduplicated and chunked to ~100 words, built with
   `treeqa index build --corpus` (the streamed, resumable path) and the real MiniLM encoder:
   embedding throughput, index build time, peak RSS.
2. Synthetic vectors (clustered 384-d unit vectors, like sentence embeddings): for each faiss
   index type treeqa chooses or offers, build time (train + add), size on disk, peak RSS,
   single-query latency and recall@10 against exact search, at the query-time settings treeqa
   uses (nprobe 16, efSearch 64).

Each measurement runs in a fresh process for its own peak RSS.

    python benchmarks/index_scale.py [--real 0] [--synthetic 1000000] [--out benchmarks/index_scale.md]

Run it alone: the figures are wall-clock seconds on this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384
TYPES = ("Flat", "IVF4096,Flat", "IVF4096,SQ8", "IVF4096,PQ48", "HNSW32")
QUERIES = 200
CLUSTERS = 4096
WIKIPEDIA = 21_000_000


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- 1. the real corpus --------------------------------------------------------------------

def real_passages(limit: int = 0) -> tuple[list, int]:
    """Every paragraph of the shared data, deduplicated, through the JSONL corpus reader
    (chunked to ~100 words); returns the passages and the number of documents."""
    from treeqa.data import load_corpus
    from treeqa.data.jsonl_corpus import read_jsonl_corpus

    seen = {}
    for dataset, wiki in (("hotpotqa", True), ("2wikimultihopqa", False), ("musique", False), ("nq", False)):
        for p in load_corpus(dataset, with_wikipedia=wiki):
            seen.setdefault(p.id, p)
    with tempfile.TemporaryDirectory(dir=os.environ.get("TREEQA_CACHE_DIR")) as tmp:
        path = Path(tmp) / "corpus.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for p in seen.values():
                fh.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n")
        passages = list(read_jsonl_corpus(path, chunk_words=100))
    return (passages[:limit] if limit else passages), len(seen)


def real_case(limit: int) -> dict:
    from treeqa.retrievers import streaming
    from treeqa.retrievers.dense import embed

    passages, documents = real_passages(limit)
    with tempfile.TemporaryDirectory(dir=os.environ.get("TREEQA_CACHE_DIR")) as tmp:
        spent = {"embed": 0.0}

        def timed_embed(texts):
            started = time.perf_counter()
            out = embed(texts)
            spent["embed"] += time.perf_counter() - started
            return out

        started = time.perf_counter()
        folder = streaming.build(iter(passages), Path(tmp) / "idx" / "scale", {"name": "scale"}, timed_embed,
                                 batch_size=256, progress=False)
        total = time.perf_counter() - started
        size = sum(f.stat().st_size for f in folder.iterdir())
        meta = json.loads((folder / "meta.json").read_text())
        peak = _peak_mb()
        recalls = real_recalls(folder, embed)
    return {"passages": len(passages), "documents": documents, "seconds": round(total, 1),
            "embed_seconds": round(spent["embed"], 1),
            "passages_per_second": round(len(passages) / spent["embed"], 1),
            "index_type": meta["index_type"], "folder_mb": round(size / 2**20, 1), "peak_rss_mb": round(peak),
            "recall_at_10_real": recalls}


def real_recalls(folder: Path, embed) -> dict:
    """recall@10 of the approximate index types against exact search on the real vectors, for
    real questions (HotpotQA dev and NQ test), at treeqa's query-time settings."""
    import faiss

    from treeqa.data import load_examples
    from treeqa.retrievers.dense import INDEX_FILE

    exact = faiss.read_index(str(folder / INDEX_FILE))
    vectors = exact.reconstruct_n(0, exact.ntotal)
    questions = [ex.question for ds, split in (("hotpotqa", "dev"), ("nq", "test"))
                 for ex in load_examples(ds, split, n=QUERIES // 2)]
    queries = embed(questions)
    truth = exact.search(queries, 10)[1]
    nlist = 1 << round(np.log2(4 * np.sqrt(len(vectors))))
    out = {}
    for index_type in (f"IVF{nlist},Flat", f"IVF{nlist},SQ8", f"IVF{nlist},PQ48", "HNSW32"):
        index = faiss.index_factory(DIM, index_type, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.add(vectors)
        if "IVF" in index_type:
            faiss.extract_index_ivf(index).nprobe = 16
        if "HNSW" in index_type:
            index.hnsw.efSearch = 64
        out[index_type] = recall_at_10(index.search(queries, 10)[1], truth)
    return out


def recall_at_10(found, truth) -> float:
    return round(float(np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found, truth, strict=True)])), 3)


# --- 2. synthetic vectors --------------------------------------------------------------------

def make_vectors(path: Path, n: int, seed: int = 0) -> None:
    """`n` clustered unit vectors (and QUERIES query vectors after them) into an .npy file."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((CLUSTERS, DIM)).astype(np.float32)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n + QUERIES, DIM))
    for start in range(0, n + QUERIES, 100_000):
        end = min(n + QUERIES, start + 100_000)
        rows = centers[rng.integers(0, CLUSTERS, end - start)] + 0.8 * rng.standard_normal((end - start, DIM))
        out[start:end] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    out.flush()


def synthetic_case(path: Path, n: int, index_type: str, truth: Path) -> dict:
    import faiss

    from treeqa.retrievers import streaming

    data = np.load(path, mmap_mode="r")
    queries = np.ascontiguousarray(data[n:n + QUERIES])
    started = time.perf_counter()
    index = faiss.index_factory(DIM, index_type, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        rows = np.sort(np.random.default_rng(0).choice(n, size=min(n, streaming.TRAIN_SAMPLE), replace=False))
        index.train(np.ascontiguousarray(data[rows]))
    trained = time.perf_counter() - started
    for start in range(0, n, streaming.ADD_CHUNK):
        index.add(np.ascontiguousarray(data[start:min(n, start + streaming.ADD_CHUNK)]))
    build = time.perf_counter() - started
    if index_type == "Flat":  # exact search: the ground truth for the others
        np.save(truth, index.search(queries, 10)[1])
    if "IVF" in index_type:
        faiss.extract_index_ivf(index).nprobe = 16
    if "HNSW" in index_type:
        index.hnsw.efSearch = 64
    with tempfile.NamedTemporaryFile(dir=path.parent) as fh:
        faiss.write_index(index, fh.name)
        disk = os.path.getsize(fh.name)
    faiss.omp_set_num_threads(1)  # one query at a time, as a program asks
    latencies, found = [], []
    for q in queries:
        t = time.perf_counter()
        found.append(index.search(q[None, :], 10)[1][0])
        latencies.append(time.perf_counter() - t)
    recall = recall_at_10(found, np.load(truth))
    return {"index": index_type, "n": n, "train_seconds": round(trained, 1), "build_seconds": round(build, 1),
            "disk_mb": round(disk / 2**20, 1), "bytes_per_vector": round(disk / n, 1),
            "query_ms_median": round(1000 * float(np.median(latencies)), 2),
            "recall_at_10": recall, "peak_rss_mb": round(_peak_mb())}


# --- running and reporting --------------------------------------------------------------------

def in_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(real: dict | None, synthetic: list[dict], n: int) -> str:
    lines = ["# Dense indexes at scale", "",
             f"Command: `python benchmarks/index_scale.py --synthetic {n}`; {os.cpu_count()} cores, run alone.", ""]
    if real:
        lines += ["## A real corpus, through `treeqa index build --corpus` (MiniLM on CPU)", "",
                  "| passages | documents | embedding passages/s | build s (all) | index | folder MB | peak RSS MB |",
                  "|---|---|---|---|---|---|---|",
                  f"| {real['passages']:,} | {real['documents']:,} | {real['passages_per_second']} | {real['seconds']} "
                  f"| {real['index_type']} | {real['folder_mb']} | {real['peak_rss_mb']} |", "",
                  f"recall@10 against exact search on these real vectors, for {QUERIES} real questions (HotpotQA dev, "
                  "NQ test), at treeqa's query-time settings (nprobe 16, efSearch 64): "
                  + ", ".join(f"{k} {v}" for k, v in real["recall_at_10_real"].items()) + ".", ""]
    lines += [f"## {n:,} synthetic 384-d vectors ({CLUSTERS} clusters), per index type", "",
              "| index | train s | build s (train + add) | disk MB | bytes/vector | query ms (1 thread) | "
              "recall@10 vs exact | peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
    for r in synthetic:
        lines.append(f"| {r['index']} | {r['train_seconds']} | {r['build_seconds']} | {r['disk_mb']} | "
                     f"{r['bytes_per_vector']} | {r['query_ms_median']} | {r['recall_at_10']} | {r['peak_rss_mb']} |")
    lines += ["", f"## Extrapolated to Wikipedia ({WIKIPEDIA:,} passages)", "",
              "| index | RAM and disk (bytes/vector × 21M) | build (add time × 21M / n; training as measured) |",
              "|---|---|---|"]
    for r in synthetic:
        add = r["build_seconds"] - r["train_seconds"]
        hours = (r["train_seconds"] + add * WIKIPEDIA / n) / 3600
        lines.append(f"| {r['index']} | {r['bytes_per_vector'] * WIKIPEDIA / 2**30:.1f} GiB | {hours:.1f} h |")
    if real:
        hours = WIKIPEDIA / real["passages_per_second"] / 3600
        lines += ["", f"Embedding 21M passages on this CPU at {real['passages_per_second']} passages/s: "
                      f"{hours:,.0f} hours ({hours / 24:,.1f} days)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", type=int, default=0, help="cap on real passages (0: all)")
    parser.add_argument("--no-real", action="store_true", help="skip the real corpus")
    parser.add_argument("--synthetic", type=int, default=1_000_000)
    parser.add_argument("--types", default=";".join(TYPES), help="faiss factory strings, ';'-separated")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = real_case(int(rest[0])) if kind == "real" else synthetic_case(Path(rest[0]), int(rest[1]), rest[2],
                                                                              Path(rest[3]))
        print(json.dumps(result))
        return
    real = None if args.no_real else in_child("real", str(args.real))
    if real:
        print(json.dumps(real), flush=True)
    results = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TREEQA_CACHE_DIR")) as tmp:
        vectors, truth = Path(tmp) / "vectors.npy", Path(tmp) / "truth.npy"
        make_vectors(vectors, args.synthetic)
        for index_type in ["Flat"] + [t for t in args.types.split(";") if t != "Flat"]:  # exact first: the truth
            results.append(in_child("synthetic", str(vectors), str(args.synthetic), index_type, str(truth)))
            print(json.dumps(results[-1]), flush=True)
    text = report(real, results, args.synthetic)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
