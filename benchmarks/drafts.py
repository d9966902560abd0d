"""Prompt-lookup drafts (TREEQA_DRAFT_TOKENS) on real program prompts, against plain greedy decoding.

    python benchmarks/drafts.py [--questions 3] [--drafts 2,3,4] [--out benchmarks/drafts.md]

Runs zero-shot ToR and beam on the first seeded HotpotQA *train* questions and keeps every
request they send to the embedded engine. Then each request is decoded again, in the same
order and without the RAM prefix cache, by a plain engine and by engines that draft up to k
tokens: how many replies are identical, the plain path's top-2 log-probability margin where
a reply first differs, drafts kept, and seconds. Each pass runs in a fresh process. Run it alone.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def capture(n: int, folder: Path) -> None:
    from treeqa.data import load_examples
    from treeqa.evaluation import run_example
    from treeqa.lm import adapter_for, get_lm, request_messages
    from treeqa.programs import build_program
    from treeqa.retrievers import get_retriever

    lm = get_lm("local", cache=False)
    engine = lm._engine_spec
    requests, complete = [], engine.complete

    def keep(request):
        requests.append(request)
        return complete(request)

    engine.complete = keep
    examples = load_examples("hotpotqa", "train", n=n, seed=0)
    retriever = get_retriever("hotpotqa")
    for name in ("tor", "beam"):
        program = build_program(name, retriever)
        for example in examples:
            run_example(program, example, lm, keep_tree=False, adapter=adapter_for(lm))
    calls = []
    for request in requests:
        config = request.config
        response_format = config.response_format or {}
        schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema")
        calls.append({"messages": request_messages(request), "max_tokens": config.max_tokens or engine.max_tokens,
                      "stop": list(config.stop) or None, "schema": schema})
    (folder / "requests.pkl").write_bytes(pickle.dumps(calls))


def replay(draft: int, folder: Path) -> None:
    """Decode every kept request; the plain pass (draft 0) also records the top-2 log-probabilities."""
    from treeqa.lm import LlamaEngine

    engine = LlamaEngine(kv_cache_mb=0, draft_tokens=draft)
    llama, decoding = engine.llama, engine.llama.treeqa_decoding
    rows = []
    for call in pickle.loads((folder / "requests.pkl").read_bytes()):
        call = dict(call)
        schema = call.pop("schema")
        grammar = engine._grammar_for({"schema": schema}) if schema else None
        decoding.reset_counts()
        decoding.top_logprobs = 2 if draft == 0 else None
        started = time.perf_counter()
        out = llama.create_chat_completion(temperature=0.0, grammar=grammar, **call)
        row = {"text": out["choices"][0]["message"]["content"], "completion": out["usage"]["completion_tokens"],
               "seconds": time.perf_counter() - started, "verify": decoding.verify_batches,
               "drafted": decoding.drafted}
        if draft == 0:
            row["steps"] = [(llama.detokenize([t]).decode("utf-8", "replace"), top[0][1] - top[1][1])
                            for t, _, top in decoding.last.logprobs]
        rows.append(row)
    decoding.top_logprobs = None
    (folder / f"replay-{draft}.json").write_text(json.dumps(rows))


def first_difference_margin(plain: dict, other: dict) -> float:
    """The plain path's top-2 margin at the token holding the first character where the replies differ."""
    at = next(i for i, (a, b) in enumerate(zip(plain["text"] + "\0", other["text"] + "\1", strict=False)) if a != b)
    seen = 0
    for piece, margin in plain["steps"]:
        seen += len(piece)
        if seen > at:
            return margin
    return float("nan")


def summary(plain: list[dict], rows: list[dict]) -> dict:
    differ = [first_difference_margin(a, b) for a, b in zip(plain, rows, strict=True) if a["text"] != b["text"]]
    drafted = sum(r["drafted"] for r in rows)
    kept = sum(min(r["drafted"], max(0, r["completion"] - 1 - r["verify"])) for r in rows)
    seconds, plain_seconds = sum(r["seconds"] for r in rows), sum(r["seconds"] for r in plain)
    return {"identical": f"{len(rows) - len(differ)}/{len(rows)}", "seconds": round(seconds, 1),
            "vs_plain_pct": round(100 * (seconds / plain_seconds - 1), 1),
            "generated": sum(r["completion"] for r in rows), "drafted": drafted, "kept": kept,
            "kept_pct": round(100 * kept / drafted) if drafted else None,
            "margins": sorted(round(m, 3) for m in differ)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--drafts", default="2,3,4")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("drafts.md"))
    parser.add_argument("--step", nargs=2, help=argparse.SUPPRESS)  # child process: capture N | replay K, folder
    args = parser.parse_args()
    if args.step:
        kind, value = args.step[0].split(":")
        (capture if kind == "capture" else replay)(int(value), Path(args.step[1]))
        return
    folder = Path(tempfile.mkdtemp(prefix="treeqa-drafts-"))
    drafts = [0] + [int(k) for k in args.drafts.split(",")]
    for step in [f"capture:{args.questions}"] + [f"replay:{k}" for k in drafts]:
        subprocess.run([sys.executable, __file__, "--step", step, str(folder)], check=True)
        print("done", step, flush=True)
    plain = json.loads((folder / "replay-0.json").read_text())
    lines = ["# Prompt-lookup drafts against plain greedy decoding, on real program prompts", "",
             f"Command: `python benchmarks/drafts.py --questions {args.questions} --drafts {args.drafts}` "
             f"(run alone, embedded model, {time.strftime('%Y-%m-%d')}): the {len(plain)} requests zero-shot ToR and "
             f"beam sent for the first {args.questions} seeded HotpotQA train questions, decoded again in order "
             "without the RAM prefix cache.", "",
             f"Plain greedy: {sum(r['seconds'] for r in plain):.1f} s, {sum(r['completion'] for r in plain)} "
             "tokens generated.", "",
             "| draft tokens | identical replies | seconds | vs plain | generated | drafted | kept | "
             "plain top-2 margins where a reply first differs (nats) |", "|---|---|---|---|---|---|---|---|"]
    for k in drafts[1:]:
        row = summary(plain, json.loads((folder / f"replay-{k}.json").read_text()))
        lines.append(f"| {k} | {row['identical']} | {row['seconds']} | {row['vs_plain_pct']:+}% | {row['generated']} | "
                     f"{row['drafted']} | {row['kept']} ({row['kept_pct']}%) | {', '.join(map(str, row['margins']))} |")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
