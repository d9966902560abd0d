"""Soak `treeqa serve`: many concurrent clients, unique questions, a fake LM of fixed latency.

    python benchmarks/serve_load.py [--clients 20] [--questions 2000] [--latency 0.05]
                                    [--max-seconds 300] [--out benchmarks/serve_load.md]
    python benchmarks/serve_load.py --simulated-endpoint --latency 0.5 --questions 400 [--concurrency 1]
    python benchmarks/serve_load.py --real-server --questions 60   # llama.cpp's server behind it

The server runs in a subprocess (the app `treeqa serve` builds, DirectAnswer over an LM whose
engine sleeps `--latency` seconds and answers, with the bounded in-memory response cache `serve` has), on
127.0.0.1 at a free port; the clients are asyncio tasks in this process sending POST /v1/ask,
each question asked once. It prints throughput, latency p50/p99, answers by HTTP status, and
the server's RSS at start, after warm-up (the first 10% of questions) and at the end. Bounded:
it stops sending after `--max-seconds`, and nothing but 127.0.0.1 is contacted.

With `--simulated-endpoint`, `serve` is backed by an OpenAI-compatible endpoint on 127.0.0.1
that takes `--latency` seconds a call and has capacity to spare (what `--concurrency` against
vLLM is for); with `--real-server` (or `--api-base URL` for a server already running), by a
real one: llama.cpp's server with the embedded GGUF, started on 127.0.0.1 as
docs/language-models.md starts it (`servers.llama_server`). `serve` answers `--concurrency` requests at once
(default: one per client) and queues up to `--clients` more.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from servers import llama_server, simulated_endpoint  # benchmarks/, beside this script

SERVER = textwrap.dedent("""
    import json, sys, time
    import dspy, uvicorn
    from dspy.lm15 import Message, Response, TextPart, Usage
    from treeqa.lm import memory_only_cache
    from treeqa.programs import build_program
    from treeqa.serving import Served, create_app, program_info

    port, latency, concurrency, queue = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    cache, api_base = sys.argv[5] == "cache", (sys.argv[6] if len(sys.argv) > 6 else None)

    class FixedLatency:
        def complete(self, request):
            time.sleep(latency)
            text = json.dumps({"answer": "Paris"}) if request.config.response_format else (
                "[[ ## answer ## ]]\\nParis\\n\\n[[ ## completed ## ]]")
            return Response(id=None, model="fake", message=Message.assistant([TextPart(text)]),
                            finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=2))

        def close(self):
            pass

    memory_only_cache()  # what `treeqa serve` configures
    if api_base:
        from treeqa.lm import get_lm
        lm = get_lm("openai/qwen", api_base=api_base, cache=cache)
    else:
        lm = dspy.LM("local/fixed-latency", engine=FixedLatency(), cache=cache, num_retries=0)
    program = build_program("direct")
    served = Served(program, lm, dspy.ChatAdapter(), program_info(program, "direct", lm, None))
    uvicorn.run(create_app(served, concurrency=concurrency, queue_size=queue, time_limit=600),
                host="127.0.0.1", port=port, log_level="warning")
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile99(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def soak(url: str, clients: int, questions: int, max_seconds: float, pid: int) -> dict:
    import httpx

    queue: asyncio.Queue = asyncio.Queue()
    for i in range(questions):
        queue.put_nowait(f"Which city is question number {i} about, {i * 7919 % 1000003}?")
    latencies, statuses, marks = [], Counter(), {}
    warm = max(1, questions // 10)
    started = time.monotonic()

    async def client(http: httpx.AsyncClient) -> None:
        while not queue.empty() and time.monotonic() - started < max_seconds:
            question = queue.get_nowait()
            sent = time.monotonic()
            try:
                response = await http.post(f"{url}/v1/ask", json={"question": question})
                statuses[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                statuses[type(exc).__name__] += 1
            latencies.append(time.monotonic() - sent)
            if len(latencies) == warm:
                marks["warm"] = rss_mb(pid)

    async with httpx.AsyncClient(timeout=600) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    seconds = time.monotonic() - started
    after_warm_up = sorted(latencies[warm:]) or [float("nan")]
    latencies.sort()
    return {"sent": len(latencies), "seconds": round(seconds, 1),
            "questions_per_s": round(len(latencies) / seconds, 1),
            "p50_ms": round(1000 * statistics.median(latencies), 1),
            "p99_ms": round(1000 * percentile99(latencies), 1),
            "p99_after_warm_up_ms": round(1000 * percentile99(after_warm_up), 1),
            "statuses": dict(statuses), "rss_warm_mb": round(marks.get("warm", float("nan")), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the fake LM takes per call")
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--no-cache", dest="cache", action="store_false", help="serve without DSPy's response cache")
    parser.add_argument("--out", type=Path, default=None, help="append the figures to this Markdown file")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="requests serve answers at once (default: --clients); the queue holds --clients more")
    parser.add_argument("--api-base", default=None, help="back serve with this OpenAI-compatible endpoint")
    parser.add_argument("--simulated-endpoint", action="store_true",
                        help="back serve with an OpenAI-compatible endpoint on 127.0.0.1 that takes --latency "
                             "seconds a call and has capacity to spare")
    parser.add_argument("--real-server", action="store_true",
                        help="start llama.cpp's server with the embedded model and back serve with it")
    args = parser.parse_args()
    if args.real_server:
        with llama_server(logprobs=False) as url:
            args.api_base, args.backend = url, "llama.cpp server (1 slot)"
            run(args)
    elif args.simulated_endpoint:
        with simulated_endpoint(args.latency, answer="Paris") as url:
            args.api_base, args.backend = url, f"simulated endpoint, {args.latency} s"
            run(args)
    else:
        args.backend = f"endpoint at {args.api_base}" if args.api_base else f"fake LM, {args.latency} s"
        run(args)


def run(args) -> None:
    os.environ.setdefault("OPENAI_API_KEY", "none")
    port = free_port()
    cache_dir = os.environ.get("TREEQA_CACHE_DIR", "/tmp/treeqa-soak")  # a throwaway DSPy disk cache
    concurrency = args.concurrency or args.clients
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(args.latency), str(concurrency),
                               str(args.clients), "cache" if args.cache else "no-cache",
                               *([args.api_base] if args.api_base else [])],
                              env={**os.environ, "TREEQA_CACHE_DIR": cache_dir})
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        for _ in range(600):  # wait for it to listen (importing DSPy takes seconds)
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise SystemExit("the server did not start")
        start_rss = rss_mb(server.pid)
        figures = asyncio.run(soak(url, args.clients, args.questions, args.max_seconds, server.pid))
        figures = {"clients": args.clients, "questions": args.questions, "concurrency": concurrency,
                   "backend": args.backend,
                   "rss_start_mb": round(start_rss, 1), **figures, "rss_end_mb": round(rss_mb(server.pid), 1)}
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps(figures, indent=2))
    if args.out:
        line = (f"| {time.strftime('%Y-%m-%d')} | {figures['backend']} | {figures['clients']} | "
                f"{figures['concurrency']} | {figures['sent']} | "
                f"{figures['questions_per_s']} | {figures['p50_ms']} | {figures['p99_ms']} | "
                f"{figures['p99_after_warm_up_ms']} | "
                f"{figures['statuses']} | {figures['rss_start_mb']} / {figures['rss_warm_mb']} / "
                f"{figures['rss_end_mb']} |\n")
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(line)


if __name__ == "__main__":
    main()
