"""The embedded engine on a busy CPU: prompt and generation speed alone and beside a busy process,
under libgomp's default wait policy and under OMP_WAIT_POLICY=PASSIVE, with 2 threads and 1.

llama.cpp's CPU backend runs each token's graph in an OpenMP parallel region. Between regions,
libgomp's default keeps the worker threads spinning for a while before they sleep; on a machine
whose cores are all taken, a spinning worker holds a core the other process wanted and the next
region waits for a worker the scheduler has parked. PASSIVE makes idle workers sleep at once.
libgomp reads the variable once, when it is loaded (by llama.cpp or torch, whichever comes first
in a process), so every configuration runs in a fresh process; `import treeqa` sets PASSIVE
unless the variable is already set, and an empty value here stands for libgomp's default.

Each configuration: a fresh process loads the engine, then 3 times evaluates a fresh ~512-token
prompt and greedily generates 32 tokens; the median of each speed is reported. "busy" runs one
process spinning on one core beside it (what a user's other work looks like to the scheduler).
The sentence-transformers encoder (torch, the same libgomp) is measured alone under both
policies too, since the setting reaches it as well.

    python benchmarks/engine_under_load.py [--reps 3] > benchmarks/engine_under_load.md
"""

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
POLICIES = {"libgomp default": "", "PASSIVE": "PASSIVE"}
FILLER = ("The archive lists every bridge, ferry and mountain pass of the old province, with the year "
          "each was opened and the name of the engineer who built it. ")


def engine_child(threads: int, reps: int) -> dict:
    """Runs in the measured process: the engine's own loader, fresh prompts, greedy tokens."""
    sys.path.insert(0, str(ROOT))
    from treeqa.lm import _weights
    from treeqa.lm._engine import LlamaEngine

    llama = LlamaEngine._load(_weights.model_path(), threads, 2048, 0)
    prompt_speed, gen_speed = [], []
    for rep in range(reps):
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
    return {"prompt_tps": statistics.median(prompt_speed), "gen_tps": statistics.median(gen_speed),
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


def measure(kind: str, policy: str, threads: int, busy: bool, reps: int) -> dict:
    env = {**os.environ, "OMP_WAIT_POLICY": policy}
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        out = subprocess.run([sys.executable, __file__, "--child", kind, "--threads", str(threads),
                              "--reps", str(reps)], env=env, capture_output=True, text=True, check=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", choices=["engine", "encoder"])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.child:
        result = engine_child(args.threads, args.reps) if args.child == "engine" else encoder_child(args.reps)
        print(json.dumps(result))
        return

    print(f"# The embedded engine on a busy CPU\n\n`python benchmarks/engine_under_load.py --reps {args.reps}`, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
          f"({_cpu_name()}); one ~512-token prompt and 32 greedy tokens a repetition, the median of "
          f"{args.reps}; busy = one process spinning beside it.\n")
    print("| threads | wait policy | load | prompt tok/s | generated tok/s | per repetition (prompt; generated) |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for threads in (2, 1):
        for name, policy in POLICIES.items():
            for busy in (False, True):
                r = measure("engine", policy, threads, busy, args.reps)
                rows[threads, name, busy] = r
                print(f"| {threads} | {name} | {'busy' if busy else 'alone'} | {r['prompt_tps']:.1f} | "
                      f"{r['gen_tps']:.1f} | {r['prompt_all']}; {r['gen_all']} |", flush=True)
    print("\n| encoder (all-MiniLM-L6-v2, 256 passages) | wait policy | passages/s | per repetition |")
    print("|---|---|---|---|")
    for name, policy in POLICIES.items():
        r = measure("encoder", policy, 2, False, args.reps)
        print(f"| alone | {name} | {r['passages_per_s']:.1f} | {r['all']} |", flush=True)
    print("\nGeneration beside a busy process as a share of alone (fair share on 2 cores with one busy "
          "process: about 2/3):\n")
    for (threads, name, busy), r in rows.items():
        if busy:
            alone = rows[threads, name, False]
            print(f"- {threads} thread(s), {name}: prompt {r['prompt_tps'] / alone['prompt_tps']:.2f}, "
                  f"generated {r['gen_tps'] / alone['gen_tps']:.2f} of alone")


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    main()
