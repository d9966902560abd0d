"""The trained reader on an endpoint answers as the embedded engine does (issue 86, item 5).

    python benchmarks/served_reader.py [--sample hotpotqa-dev5] [--out benchmarks/runs/served-reader]

For two compiled files (rta reading through the released reader, and the main command's compiled
ToR), runs `treeqa evaluate` on the sample twice, `--no-cache`: on the embedded engine, then on a
real llama.cpp server (llama-cpp-python's, on 127.0.0.1) serving the base model as `qwen` and the
base model with the released adapter as `treeqa-reader`, reached with `--lm openai/qwen --api-base
URL --reader-model openai/treeqa-reader` as a user reaches it. Prints and writes (comparison.json)
each question's answers side by side. llama-cpp-python's server holds one model at a time and
reloads on a switch, so the served seconds say nothing about speed; only the answers count.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOR = ROOT / "benchmarks/runs/hotpotqa-dev-unexamined-skip100-n197/tor-default-compile/compiled.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, adapter: Path, config: Path, threads: int) -> tuple[subprocess.Popen, str]:
    """llama.cpp's server with two models: the base (`qwen`) and the base with the adapter."""
    port = free_port()
    common = {"model": str(model), "n_ctx": 4096, "n_threads": threads, "logits_all": False}
    config.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": [
        {**common, "model_alias": "qwen"}, {**common, "model_alias": "treeqa-reader", "lora_path": str(adapter)}]}))
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--config_file", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1):
                return server, url
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"llama.cpp's server exited with status {server.returncode}") from None
            time.sleep(0.2)
    server.kill()
    raise SystemExit("llama.cpp's server did not answer within 120 s")


def evaluate(compiled: Path, sample: str, out: Path, *endpoint: str) -> dict[str, dict]:
    """id -> answer, EM and LM calls of one `treeqa evaluate` run (resumes when `out` holds its records)."""
    cmd = [str(ROOT / ".venv/bin/treeqa"), "evaluate", "--compiled", str(compiled), "--sample", sample,
           "--no-cache", "--out", str(out), *endpoint]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "none")})
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines() if line.strip()]
    return {r["id"]: {"answer": r["prediction"], "em": r["em"], "lm_calls": r["lm_calls"]} for r in records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="hotpotqa-dev5")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/runs/served-reader")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from treeqa.lm import model_path
    from treeqa.train.attach import attach_to_compiled
    from treeqa.train.released import released_reader

    released = released_reader()
    args.out.mkdir(parents=True, exist_ok=True)
    rta = args.out / "rta-released" / "compiled.json"
    if not rta.is_file():
        attach_to_compiled("rta", released.adapter, rta, [], "hotpotqa")
    files = {"rta-released": rta, "tor-default-compile": TOR}
    embedded = {name: evaluate(path, args.sample, args.out / name / "embedded") for name, path in files.items()}
    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_server(model_path(), released.adapter, Path(tmp) / "config.json", args.threads)
        try:
            served = {name: evaluate(path, args.sample, args.out / name / "served", "--lm", "openai/qwen",
                                     "--api-base", url, "--reader-model", "openai/treeqa-reader")
                      for name, path in files.items()}
        finally:
            server.terminate()
            server.wait(timeout=30)
    comparison = {}
    for name in files:
        rows = [{"id": qid, "embedded": embedded[name][qid], "served": served[name].get(qid)}
                for qid in embedded[name]]
        same = sum(r["served"] is not None and r["served"]["answer"] == r["embedded"]["answer"] for r in rows)
        comparison[name] = {"questions": len(rows), "same_answer": same, "rows": rows}
        print(f"\n{name}: {same} of {len(rows)} answers the same")
        for r in rows:
            served_answer = r["served"]["answer"] if r["served"] else None
            mark = "=" if served_answer == r["embedded"]["answer"] else "≠"
            print(f"  {mark} {r['id']}: embedded {r['embedded']['answer']!r}, served {served_answer!r}")
    (args.out / "comparison.json").write_text(json.dumps(comparison, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
