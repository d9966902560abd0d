"""What `--threads` gives against an endpoint: seconds a question and questions a second.

    python benchmarks/endpoint.py [--latency 0.5] [--questions 3] [--threads 1 2 4] [--out benchmarks/endpoint.md]
    python benchmarks/endpoint.py --api-base http://127.0.0.1:8080/v1 --lm openai/qwen   # a real server

By default the endpoint is simulated: an OpenAI-compatible server on 127.0.0.1 that waits
`--latency` seconds and answers any signature (`tests.fakes.generic_responder`), as a server with
capacity to spare would; the retriever is the tests' fake one, so only the LM's latency counts.
Each program runs on the same questions with each `--threads`: the beam and ToR send one search
level's calls together (the Ask calls and state chains of a beam depth, the reviews of a node's
children), the single-path programs answer questions in parallel. The figure that matters is the
speed-up over `--threads 1`, which shows how much of the calls' latency the code overlaps.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fakes, when run as a script

import dspy  # noqa: E402

from tests.fakes import FakeEndpoint, FakeRetriever, generic_responder  # noqa: E402
from treeqa.evaluation import evaluate  # noqa: E402
from treeqa.lm import get_lm  # noqa: E402
from treeqa.programs import PROGRAMS, build_program  # noqa: E402

QUESTIONS = ["Which city is the birthplace of the director of Jaws?",
             "Were Scott Derrickson and Ed Wood of the same nationality?",
             "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?",
             "Which magazine was started first, Arthur's Magazine or First for Women?",
             "Who was born first, Pablo Trapero or Aleksandr Sokurov?",
             "In what year was the university where Sergei Prokofiev studied founded?"]
SETTINGS = {"beam": {"preset": "nq"}, "tor": {}, "cor": {}, "rta": {}, "direct": {}}


def simulated(latency: float):
    """A FakeEndpoint that answers any signature in DSPy's chat format after `latency` seconds."""
    respond = generic_responder({"": "Cincinnati"}, default_answer="Cincinnati")

    class Request:
        def __init__(self, messages):
            self.messages = messages

    return FakeEndpoint(lambda n, body, headers: (200, respond(Request(body["messages"])), latency))


def measure(program_name: str, threads: int, lm, questions: list[str]) -> dict:
    from treeqa.runs import split_threads

    inner, outer = split_threads(program_name, threads, lm)
    settings = dict(SETTINGS[program_name])
    preset = settings.pop("preset", None)
    retriever = FakeRetriever() if PROGRAMS[program_name].retrieves else None
    program = build_program(program_name, retriever, preset=preset,
                            **settings, **({"threads": inner} if inner > 1 else {}))
    examples = [dspy.Example(id=f"q{i}", question=q, answers=["Cincinnati"]).with_inputs("question")
                for i, q in enumerate(questions)]
    started = time.perf_counter()
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        result = evaluate(program, examples, lm=lm, threads=outer, progress=False, adapter=dspy.ChatAdapter())
    seconds = time.perf_counter() - started
    return {"program": program_name, "threads": threads, "questions": len(examples),
            "calls_per_q": result["summary"]["lm_calls_per_q"], "seconds_per_q": round(seconds / len(examples), 2),
            "questions_per_s": round(len(examples) / seconds, 3), "failed_calls": result["summary"]["failed_calls"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the simulated endpoint takes a call")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--programs", nargs="+", default=["beam", "tor", "cor", "rta"])
    parser.add_argument("--api-base", default=None, help="a real server instead of the simulated one")
    parser.add_argument("--lm", default="openai/qwen")
    parser.add_argument("--out", type=Path, default=None, help="append the table to this Markdown file")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "none")
    questions = (QUESTIONS * (1 + args.questions // len(QUESTIONS)))[:args.questions]

    rows = []
    endpoint = simulated(args.latency) if args.api_base is None else None
    if endpoint is not None:
        endpoint.__enter__()
    try:
        url = args.api_base or endpoint.url
        lm = get_lm(args.lm, api_base=url, cache=False)
        for name in args.programs:
            base = None
            for threads in args.threads:
                row = measure(name, threads, lm, questions)
                base = base or row["seconds_per_q"]
                row["speed_up"] = round(base / row["seconds_per_q"], 2)
                rows.append(row)
                print(json.dumps(row))
    finally:
        if endpoint is not None:
            endpoint.__exit__(None, None, None)
    if args.out:
        what = f"simulated endpoint, {args.latency} s a call" if args.api_base is None else f"{args.lm} at {url}"
        lines = [f"\n{time.strftime('%Y-%m-%d')}, {what}, {len(questions)} questions:\n",
                 "| program | threads | calls/q | s/q | q/s | speed-up | failed calls |",
                 "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['program']} | {r['threads']} | {r['calls_per_q']} | {r['seconds_per_q']} | "
                  f"{r['questions_per_s']} | {r['speed_up']}x | {r['failed_calls']} |" for r in rows]
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
