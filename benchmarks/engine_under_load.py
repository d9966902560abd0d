"""The embedded engine on a busy CPU: prompt and generation speed alone and beside one or two busy
processes, under libgomp's default wait policy, OMP_WAIT_POLICY=PASSIVE and a short spin, with
2 threads for both phases, 2 for the prompt and 1 for generation, and treeqa's default: 2 for the
prompt and, for generation, the cores other processes left idle since the last call
(`treeqa.lm._cpu_share`, read from /proc).

llama.cpp's CPU backend (built with OpenMP here) computes a token's graph in an OpenMP parallel
region with a barrier after each operation. libgomp's default spins at a barrier for a while
before it sleeps: alone that keeps the two threads in step, but when a busy process holds one of
the two cores a spinning thread waits for a partner the scheduler has parked, and burns the time
the other process wanted. libgomp reads its variables once, when it is loaded (by llama.cpp or
torch, whichever comes first in a process), so every configuration runs in a fresh process; an
empty OMP_WAIT_POLICY stands for libgomp's default.

Each configuration: a fresh process loads the engine with treeqa's own loader, then 3 times
evaluates a fresh ~512-token prompt and greedily generates 32 tokens; the median of each speed
is reported. The sentence-transformers encoder (torch, the same libgomp) is measured alone under
both policies, since a process-wide setting reaches it as well.

    python benchmarks/engine_under_load.py [--reps 3] > benchmarks/engine_under_load.md"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (label, OpenMP environment, prompt threads, generation threads); "" is libgomp's default policy
CONFIGS = [
    ("2 threads, libgomp default", {"OMP_WAIT_POLICY": ""}, 2, 2),
    ("2 threads, PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"}, 2, 2),
    ("2 threads, GOMP_SPINCOUNT=10000", {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": "10000"}, 2, 2),
    ("prompt 2 / generation 1, libgomp default", {"OMP_WAIT_POLICY": ""}, 2, 1),
    ("prompt 2 / generation 1, PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"}, 2, 1),
    ("treeqa's default: prompt 2 / generation on the idle cores", {"OMP_WAIT_POLICY": ""}, 2, 0),
]
LOADS = (0, 1, 2)  # processes spinning beside the engine
FILLER = ("The archive lists every bridge, ferry and mountain pass of the old province, with the year "
          "each was opened and the name of the engineer who built it. ")


def engine_child(threads: int, gen_threads: int, reps: int) -> dict:
    """Runs in the measured process: the engine's own loader, fresh prompts, greedy tokens."""
    sys.path.insert(0, str(ROOT))
    import llama_cpp

    from treeqa.lm import _weights
    from treeqa.lm._engine import LlamaEngine

    llama = LlamaEngine._load(_weights.model_path(), threads, 2048, 0)
    engine = LlamaEngine(llama=llama, n_threads=threads) if gen_threads == 0 else None  # 0: the engine adapts
    if engine is None:
        llama_cpp.llama_set_n_threads(llama._ctx.ctx, gen_threads, threads)  # generation, prompt (batch)
    prompt_speed, gen_speed, chosen = [], [], []
    for rep in range(reps):
        if engine is not None:  # as before each call: the cores others used since the last one
            engine._fit_generation_threads()
            chosen.append(engine.generating_with)
        text = f"Note {rep}: " + FILLER * 200
        tokens = llama.tokenize(text.encode())[:512]
        llama.reset()
        started = time.perf_counter()
        llama.eval(tokens)
        prompt_speed.append(len(tokens) / (time.perf_counter() - started))
        started = time.perf_counter()
        for _ in range(32):
            token = llama.sample(top_k=1, temp=0.0)
            llama.eval([token])
        gen_speed.append(32 / (time.perf_counter() - started))
    return {"prompt_tps": statistics.median(prompt_speed), "gen_tps": statistics.median(gen_speed), "chosen": chosen,
            "prompt_all": [round(x, 1) for x in prompt_speed], "gen_all": [round(x, 1) for x in gen_speed]}


def encoder_child(reps: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from treeqa.retrievers.encoder import load_encoder

    encoder = load_encoder()
    passages = [f"Passage {i}: " + FILLER * 3 for i in range(256)]
    encoder.encode(passages[:16])
    speeds = []
    for _ in range(reps):
        started = time.perf_counter()
        encoder.encode(passages, batch_size=32)
        speeds.append(len(passages) / (time.perf_counter() - started))
    return {"passages_per_s": statistics.median(speeds), "all": [round(x, 1) for x in speeds]}


def measure(args: list[str], env: dict[str, str], busy: int) -> dict:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        out = subprocess.run([sys.executable, __file__, *args], env={**os.environ, **env}, capture_output=True,
                             text=True, check=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return json.loads(out.stdout.strip().splitlines()[-1])


def question_seconds(r: dict, prompt: int, generated: int) -> float:
    return prompt / r["prompt_tps"] + generated / r["gen_tps"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", choices=["engine", "encoder"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gen-threads", type=int, default=2)
    args = parser.parse_args()
    if args.child:
        result = (engine_child(args.threads, args.gen_threads, args.reps) if args.child == "engine"
                  else encoder_child(args.reps))
        print(json.dumps(result))
        return

    print(f"# The embedded engine on a busy CPU\n\n`python benchmarks/engine_under_load.py --reps {args.reps}`, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
          f"({_cpu_name()}); one ~512-token prompt and 32 greedy tokens a repetition, the median of "
          f"{args.reps}; busy N = N processes spinning beside it, each configuration in a fresh process.\n")
    print("| configuration | busy | prompt tok/s | generated tok/s | per repetition (prompt; generated) |")
    print("|---|---|---|---|---|")
    rows = {}
    for label, env, threads, gen_threads in CONFIGS:
        for busy in LOADS:
            r = measure(["--child", "engine", "--threads", str(threads), "--gen-threads", str(gen_threads),
                         "--reps", str(args.reps)], env, busy)
            rows[label, busy] = r
            chosen = f" (generating with {r['chosen']} threads)" if r["chosen"] else ""
            print(f"| {label} | {busy} | {r['prompt_tps']:.1f} | {r['gen_tps']:.1f} | "
                  f"{r['prompt_all']}; {r['gen_all']}{chosen} |", flush=True)
    print("\n| encoder (all-MiniLM-L6-v2, 256 passages, alone) | passages/s | per repetition |")
    print("|---|---|---|")
    for label, policy in (("libgomp default", ""), ("PASSIVE", "PASSIVE")):
        r = measure(["--child", "encoder", "--reps", str(args.reps)], {"OMP_WAIT_POLICY": policy}, 0)
        print(f"| {label} | {r['passages_per_s']:.1f} | {r['all']} |", flush=True)
    print("\nWhat two calls cost in seconds, from the speeds above: an rta read (860 prompt tokens, 10 "
          "generated) and a review (800 prompt tokens, 80 generated); in brackets, as a multiple of alone "
          "(a fair share for a 2-thread engine: 1.5x beside one busy process, 2x beside two):\n")
    print("| configuration | busy | rta read | review |")
    print("|---|---|---|---|")
    for (label, busy), r in rows.items():
        alone = rows[label, 0]
        read, review = question_seconds(r, 860, 10), question_seconds(r, 800, 80)
        print(f"| {label} | {busy} | {read:.2f} ({read / question_seconds(alone, 860, 10):.2f}x) | "
              f"{review:.2f} ({review / question_seconds(alone, 800, 80):.2f}x) |")


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    main()
