"""Speed of the foundation on this machine: embedded LLM throughput, index build, query latency.

    python benchmarks/foundation.py [--passages N] [--queries N]

Prints Markdown; run it alone (the LLM's threads collapse when anything else uses the CPU).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import treeqa  # noqa: F401 - offline settings first


def bench_llm(repeats: int = 3) -> dict[str, float]:
    """Prompt tok/s with no cache reuse, and generated tok/s, through llama.cpp directly."""
    import llama_cpp

    from treeqa.lm import model_path
    from treeqa.settings import get_settings

    s = get_settings()
    llm = llama_cpp.Llama(model_path=str(model_path()), n_ctx=s.context_size, n_threads=s.threads,
                          n_threads_batch=s.threads, n_batch=512, seed=0, verbose=False)
    filler = " ".join(f"Fact {i}: the river number {i} flows into lake number {i * 7 % 13}." for i in range(45))
    prompt_rates, gen_rates = [], []
    for r in range(repeats):
        prompt = f"Run {r}. {filler}\nQuestion: which lake does river 3 flow into?\nAnswer:"
        llm.reset()
        start = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=1, temperature=0.0)
        t_prompt = time.perf_counter() - start
        n_prompt = out["usage"]["prompt_tokens"]
        prompt_rates.append(n_prompt / t_prompt)
        # generation: the same prompt is now cached, so the time is (almost) all decoding
        start = time.perf_counter()
        out = llm.create_completion(prompt + " Lake", max_tokens=96, temperature=0.0)
        t_gen = time.perf_counter() - start
        gen_rates.append(out["usage"]["completion_tokens"] / t_gen)
    return {"prompt_tokens": n_prompt, "prompt_tok_s": statistics.median(prompt_rates),
            "gen_tok_s": statistics.median(gen_rates)}


def bench_index(n_passages: int | None) -> dict[str, float]:
    from treeqa.data import load_corpus
    from treeqa.retrievers import DenseRetriever

    corpus = load_corpus("hotpotqa")
    subset = corpus if n_passages is None else corpus[:n_passages]
    DenseRetriever.build(subset[:64], progress=False)  # load the encoder outside the timing
    start = time.perf_counter()
    DenseRetriever.build(subset, progress=False)
    seconds = time.perf_counter() - start
    return {"corpus": len(corpus), "indexed": len(subset), "seconds": seconds, "passages_s": len(subset) / seconds}


def bench_queries(n_queries: int) -> dict[str, dict[str, float]]:
    from treeqa.data import load_split
    from treeqa.retrievers import get_retriever

    questions = [ex.question for ex in load_split("hotpotqa", "dev")[:n_queries]]
    out = {}
    for kind in ("dense", "bm25"):
        retriever = get_retriever("hotpotqa", kind)
        retriever.search(questions[0], 5)  # warm up
        times = []
        for q in questions:
            start = time.perf_counter()
            retriever.search(q, 5)
            times.append(1000 * (time.perf_counter() - start))
        times.sort()
        out[kind] = {"median_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=None, help="index only the first N passages")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    llm = bench_llm()
    index = bench_index(args.passages)
    queries = bench_queries(args.queries)
    print(f"## Foundation benchmark ({platform.machine()}, {__import__('os').cpu_count()} cores)\n")
    print("| what | figure |\n|---|---|")
    print(f"| embedded LLM prompt processing (~{llm['prompt_tokens']}-token prompt, no reuse) "
          f"| {llm['prompt_tok_s']:.0f} tok/s |")
    print(f"| embedded LLM generation (greedy) | {llm['gen_tok_s']:.1f} tok/s |")
    print(f"| dense index build, {index['indexed']:,} of {index['corpus']:,} pooled hotpotqa passages "
          f"| {index['seconds']:.0f} s, {index['passages_s']:.0f} passages/s |")
    for kind, t in queries.items():
        print(f"| {kind} query latency, top-5 over the pooled hotpotqa corpus, {args.queries} dev questions "
              f"| median {t['median_ms']:.1f} ms, p95 {t['p95_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
