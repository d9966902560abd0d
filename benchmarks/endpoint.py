"""What `--threads` gives against an endpoint: seconds a question and questions a second.

    python benchmarks/endpoint.py [--latency 0.5] [--questions 3] [--threads 1 2 4] [--out benchmarks/endpoint.md]
    python benchmarks/endpoint.py --real-server [--questions 4] [--programs rta tor beam]

By default the endpoint is simulated: an OpenAI-compatible server on 127.0.0.1 that waits
`--latency` seconds and answers any signature (`servers.simulated_endpoint`), as a server with
capacity to spare would; the retriever needs no index (`servers.NamedRetriever`), so only the LM's
latency counts.
Each program runs on the same questions with each `--threads`: the beam and ToR send one search
level's calls together (the Ask calls and state chains of a beam depth, the reviews of a node's
children), the single-path programs answer questions in parallel. The figure that matters is the
speed-up over `--threads 1`, which shows how much of the calls' latency the code overlaps.

`--real-server` measures the real thing instead: llama.cpp's OpenAI-compatible server with the
embedded GGUF, started on 127.0.0.1 (`servers.llama_server`), real
seeded HotpotQA dev questions and the dense retriever over their pooled corpus (its index must
be built), each `--threads`, then the embedded engine in this process on the same questions.
llama-cpp-python's server decodes one request at a time (a lock around its one model: no
parallel slots), so on two cores the figure to read is what the HTTP path costs against the
embedded engine, not the overlap.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import dspy
from servers import NamedRetriever, llama_server, simulated_endpoint  # benchmarks/, beside this script

from treeqa.evaluation.loop import evaluate
from treeqa.lm import get_lm
from treeqa.programs import PROGRAMS, build_program

QUESTIONS = ["Which city is the birthplace of the director of Jaws?",
             "Were Scott Derrickson and Ed Wood of the same nationality?",
             "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?",
             "Which magazine was started first, Arthur's Magazine or First for Women?",
             "Who was born first, Pablo Trapero or Aleksandr Sokurov?",
             "In what year was the university where Sergei Prokofiev studied founded?"]
SETTINGS = {"beam": {"preset": "nq"}, "tor": {}, "cor": {}, "rta": {}, "direct": {}}


def measure(program_name: str, threads: int, lm, examples: list, retriever=None) -> dict:
    from treeqa.evaluation.runs import split_threads
    from treeqa.lm import adapter_for

    inner, outer = split_threads(program_name, threads, lm)
    settings = dict(SETTINGS[program_name])
    preset = settings.pop("preset", None)
    retriever = (retriever or NamedRetriever()) if PROGRAMS[program_name].retrieves else None
    program = build_program(program_name, retriever, preset=preset,
                            **settings, **({"threads": inner} if inner > 1 else {}))
    adapter = adapter_for(lm)  # the chat adapter for an endpoint, JSON under a grammar for the engine
    started = time.perf_counter()
    with dspy.context(lm=lm, adapter=adapter):
        result = evaluate(program, examples, lm=lm, threads=outer, progress=False, adapter=adapter)
    seconds = time.perf_counter() - started
    summary = result["summary"]
    return {"program": program_name, "threads": threads, "questions": len(examples),
            "calls_per_q": summary["lm_calls_per_q"], "seconds_per_q": round(seconds / len(examples), 2),
            "questions_per_s": round(len(examples) / seconds, 3), "failed_calls": summary["failed_calls"],
            "em": summary.get("em")}


def fake_examples(questions: list[str]) -> list:
    return [dspy.Example(id=f"q{i}", question=q, answers=["Cincinnati"]).with_inputs("question")
            for i, q in enumerate(questions)]


def sweep(lm, programs, threads_list, examples, retriever=None, backend: str = "simulated endpoint") -> list[dict]:
    rows = []
    for name in programs:
        base = None
        for threads in threads_list:
            row = {"backend": backend, **measure(name, threads, lm, examples, retriever)}
            base = base or row["seconds_per_q"]
            row["speed_up"] = round(base / row["seconds_per_q"], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def real_server_rows(args) -> list[dict]:
    """The local llama.cpp server at each `--threads`, then the embedded engine, on the same
    seeded HotpotQA dev questions with the real retriever."""
    from treeqa.data import load_examples
    from treeqa.retrievers import get_retriever

    examples = load_examples("hotpotqa", "dev", n=args.questions, seed=0)
    retriever = get_retriever("hotpotqa", build=False)
    with llama_server(threads=args.server_threads, logprobs=args.logits_all) as url:
        rows = sweep(get_lm(args.lm, api_base=url, cache=False), args.programs, args.threads, examples,
                     retriever, backend=f"llama.cpp server ({args.server_threads} threads, 1 slot)")
    # the engine serves one call at a time, so --threads changes nothing for it: once
    rows += sweep(get_lm("local", cache=False), args.programs, [1], examples, retriever,
                  backend="embedded engine (2 threads)")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the simulated endpoint takes a call")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--programs", nargs="+", default=["beam", "tor", "cor", "rta"])
    parser.add_argument("--lm", default="openai/qwen")
    parser.add_argument("--real-server", action="store_true",
                        help="llama.cpp's server with the embedded model, real questions and retriever, "
                             "beside the embedded engine")
    parser.add_argument("--server-threads", type=int, default=2, help="the real server's CPU threads")
    parser.add_argument("--logits-all", action="store_true",
                        help="start the server with --logits_all (what log-probabilities need; slower prompts)")
    parser.add_argument("--out", type=Path, default=None, help="append the table to this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "none")

    if args.real_server:
        rows = real_server_rows(args)
        what = (f"llama-cpp-python's server on 127.0.0.1 (n_ctx 4096, n_threads {args.server_threads}, "
                f"logits_all {args.logits_all}, one request at a time) and the embedded engine, seeded HotpotQA dev")
    else:
        with simulated_endpoint(args.latency) as url:
            lm = get_lm(args.lm, api_base=url, cache=False)
            questions = (QUESTIONS * (1 + args.questions // len(QUESTIONS)))[:args.questions]
            rows = sweep(lm, args.programs, args.threads, fake_examples(questions))
        what = f"simulated endpoint, {args.latency} s a call"
    if args.out:
        lines = [f"\n{time.strftime('%Y-%m-%d')}, {what}, {args.questions} questions:\n",
                 "| backend | program | threads | calls/q | s/q | q/s | speed-up | EM | failed calls |",
                 "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['backend']} | {r['program']} | {r['threads']} | {r['calls_per_q']} | {r['seconds_per_q']} | "
                  f"{r['questions_per_s']} | {r['speed_up']}x | {r['em']} | {r['failed_calls']} |" for r in rows]
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
