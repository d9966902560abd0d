"""The two llama.cpp paths treeqa replaces, measured against llama-cpp-python's own.

1. Grammar-constrained greedy decoding: free decoding, treeqa's argmax-first check
   (`treeqa.lm._greedy_grammar`) and llama-cpp-python's chain, which filters the whole
   vocabulary every step, on the same review-shaped JSON schema and prompt.
2. Prefix states in the RAM cache: two system prompts used alternately (as ask/answer/score
   do), with treeqa's lean states (`treeqa.lm._lean_state`) and with llama-cpp-python's, which
   copy the logits table into every state. Each runs in a fresh process for its peak RSS.
3. What verifying drafted tokens costs: prompt throughput, one generated token, and a batch of
   b tokens (what speculative decoding verifies), and how far a batch's logits are from those
   of one-token steps over the same tokens.

    python benchmarks/engine_paths.py [--out benchmarks/engine_paths.md]

Run it alone: the figures are wall-clock seconds on this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = {"type": "object", "required": ["reasoning", "relevant", "action", "next_query"],
          "properties": {"reasoning": {"type": "string"}, "relevant": {"type": "boolean"},
                         "action": {"enum": ["accept", "reject", "search"]}, "next_query": {"type": "string"}}}
REVIEW = [{"role": "system", "content": "Judge whether the paragraph helps answer the question. Reply in JSON "
                                        "with reasoning, relevant, action (accept, reject or search) and next_query."},
          {"role": "user", "content": "Question: Which magazine was started first, Arthur's Magazine or First for "
                                      "Women?\nParagraph: Arthur's Magazine (1844-1846) was an American literary "
                                      "periodical published in Philadelphia in the 19th century."}]
SYSTEMS = {step: f"You are the {step} step of a search. " + " ".join(
    f"Rule {i}: {step} precisely, and cite the paragraph title when it matters." for i in range(40))
    for step in ("answer", "score")}
QUESTIONS = ["Who wrote Hamlet?", "What is the capital of Peru?", "When did the Second World War end?"]


def grammar_case() -> dict:
    from treeqa.lm import LlamaEngine

    engine = LlamaEngine(kv_cache_mb=0)
    llama, grammar = engine.llama, engine.grammar_from_schema(json.dumps(SCHEMA))
    treeqa_sampler = llama._init_sampler
    full_vocabulary = type(llama)._init_sampler.__get__(llama)
    llama.create_chat_completion(messages=REVIEW, temperature=0.0, max_tokens=32)  # warm up; prompt in the KV cache
    rows = {}
    for label, kwargs, init in (("free decoding (no grammar)", {}, treeqa_sampler),
                                ("grammar, argmax checked first (treeqa)", {"grammar": grammar}, treeqa_sampler),
                                ("grammar, whole vocabulary each step (llama-cpp-python)", {"grammar": grammar},
                                 full_vocabulary)):
        llama._init_sampler = init
        seconds = float("inf")
        for _ in range(2):  # the better of two
            started = time.perf_counter()
            out = llama.create_chat_completion(messages=REVIEW, temperature=0.0, max_tokens=75, **kwargs)
            seconds = min(seconds, time.perf_counter() - started)
        tokens = out["usage"]["completion_tokens"]
        rows[label] = {"tokens": tokens, "seconds": round(seconds, 2),
                       "ms_per_token": round(1000 * seconds / tokens, 1)}
    llama._init_sampler = treeqa_sampler
    return rows


def state_case(lean: bool) -> dict:
    import treeqa.lm._lean_state

    if not lean:
        treeqa.lm._lean_state.install = lambda llama: None  # llama-cpp-python's save_state / load_state
    from treeqa.lm import LlamaEngine

    llama = LlamaEngine(kv_cache_mb=512).llama
    times = []
    for question in QUESTIONS:
        for step in ("answer", "score"):
            started = time.perf_counter()
            llama.create_chat_completion(messages=[{"role": "system", "content": SYSTEMS[step]},
                                                   {"role": "user", "content": question}],
                                         temperature=0.0, max_tokens=8)
            times.append(time.perf_counter() - started)
    restored = times[2:]  # from the second question on, each call resumes its step's saved prefix
    return {"first_two_calls_s": round(sum(times[:2]), 2), "resumed_call_s": round(sum(restored) / len(restored), 2),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def batch_case() -> dict:
    import llama_cpp
    import numpy as np

    from treeqa.lm import model_path

    llama = llama_cpp.Llama(model_path=str(model_path()), n_ctx=2048, n_threads=2, n_threads_batch=2, n_batch=512,
                            logits_all=True, seed=0, verbose=False)
    prompt = llama.tokenize((REVIEW[0]["content"] + " " + REVIEW[1]["content"] + " ").encode() * 12)[:1000]
    reply = llama.tokenize(b'{"reasoning": "Arthur\'s Magazine was published in Philadelphia', add_bos=False)[:9]

    def timed(tokens, repeats: int) -> float:
        """The best seconds of `repeats` evaluations of `tokens` after the current position (kept)."""
        start, best = llama.n_tokens, float("inf")
        for _ in range(repeats):
            llama.n_tokens = start
            began = time.perf_counter()
            llama.eval(tokens)
            best = min(best, time.perf_counter() - began)
        llama.n_tokens = start
        return best

    llama.reset()
    prompt_s = timed(prompt, 2)
    llama.eval(prompt)
    step_s = timed(reply[:1], 10)
    single_logits = []
    for token in reply:  # one-token steps, each on top of the previous
        llama.eval([token])
        single_logits.append(llama.scores[llama.n_tokens - 1].copy())
    rows = {"prompt_tok_per_s": round(len(prompt) / prompt_s, 1), "step_ms": round(1000 * step_s, 1), "batches": {}}
    for b in (2, 3, 5, 9):
        llama.n_tokens = len(prompt)
        seconds = timed(reply[:b], 10)
        llama.eval(reply[:b])
        diff = max(float(np.abs(llama.scores[len(prompt) + i] - single_logits[i]).max()) for i in range(b))
        same = sum(int(np.argmax(llama.scores[len(prompt) + i]) == np.argmax(single_logits[i])) for i in range(b))
        rows["batches"][b] = {"ms": round(1000 * seconds, 1), "step_ratio": round(1000 * seconds / rows["step_ms"], 2),
                              "max_logit_diff": round(diff, 2), "argmax_same": f"{same}/{b}"}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("engine_paths.md"))
    parser.add_argument("--case", choices=["grammar", "lean", "stock", "batch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        cases = {"grammar": grammar_case, "lean": lambda: state_case(True), "stock": lambda: state_case(False),
                 "batch": batch_case}
        print(json.dumps(cases[args.case]()))
        return

    def child(case: str) -> dict:
        done = subprocess.run([sys.executable, __file__, "--case", case], check=True, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    grammar = child("grammar")
    states = {"lean states (treeqa)": child("lean"), "states with the logits table (llama-cpp-python)": child("stock")}
    batch = child("batch")
    lines = ["# llama.cpp paths: treeqa's vs llama-cpp-python's", "",
             "Command: `python benchmarks/engine_paths.py` "
             f"(run alone, embedded model, {time.strftime('%Y-%m-%d')}).", "",
             "## Greedy decoding of a JSON review, at most 75 tokens "
             "(prompt in the KV cache; the better of two runs)", "",
             "| path | tokens | seconds | ms/token |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['tokens']} | {v['seconds']} | {v['ms_per_token']} |" for k, v in grammar.items()]
    lines += ["", "## Two ~600-token system prompts used alternately, 3 questions, RAM cache 512 MB", "",
              "| states | first two calls (s) | resumed call (s) | peak RSS (MB) |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['first_two_calls_s']} | {v['resumed_call_s']} | {v['peak_rss_mb']} |"
              for k, v in states.items()]
    lines += ["", "## Verifying drafted tokens: a batch of b tokens against one-token steps", "",
              f"A 1,000-token prompt is computed at {batch['prompt_tok_per_s']} tokens/s; one generated step takes "
              f"{batch['step_ms']} ms. A batch of b tokens after it (what speculative decoding verifies: the "
              "last token and b-1 drafts):", "",
              "| b | ms | x one step | max abs logit difference from one-token steps | argmax equal |",
              "|---|---|---|---|---|"]
    lines += [f"| {b} | {v['ms']} | {v['step_ratio']} | {v['max_logit_diff']} | {v['argmax_same']} |"
              for b, v in batch["batches"].items()]
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
