"""What a question costs on the embedded model, per program.

    python benchmarks/lm_cost.py [--n 20] [--programs beam,tor] [--dataset hotpotqa] [--adapter json|chat]
    python benchmarks/lm_cost.py --n 20 --from-runs RUN_DIR [RUN_DIR ...]

For each program, runs the first N questions of the seeded dev sample (the same ones
`treeqa evaluate --n N` uses) with DSPy's response cache off, and prints: EM, seconds per
question, LM calls, prompt tokens sent and actually computed (the rest came from the
prefix cache), completion tokens, adapter parse success per signature, and the share of
wall time spent outside the LM (pipeline overhead). Run it alone: two cores only.

With --from-runs it measures nothing itself: it reads the first N questions of runs made by
`treeqa evaluate --no-cache` (their records carry the same per-question figures).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import dspy

from treeqa.data import load_examples
from treeqa.evaluation.loop import run_example
from treeqa.evaluation.records import read_records, records_file
from treeqa.lm import adapter_for, get_lm
from treeqa.programs import build_program, uses_retriever
from treeqa.retrievers import get_retriever


def measure(name: str, dataset: str, n: int, adapter: str, preset: str | None) -> dict:
    """Run the first n dev questions live, uncached; the records carry every figure."""
    examples = load_examples(dataset, "dev", n=n, seed=0)
    retriever = get_retriever(dataset) if uses_retriever(name, preset=preset) else None
    program = build_program(name, retriever, preset=preset)
    lm = get_lm("local", cache=False)
    chosen = adapter_for(lm) if adapter == "auto" else (dspy.JSONAdapter() if adapter == "json" else dspy.ChatAdapter())
    records = [run_example(program, ex, lm, keep_tree=False, adapter=chosen) for ex in examples]
    return row(name + (f" ({preset})" if preset else ""), f"live, {type(chosen).__name__}", records)


def from_run(run_dir: Path, n: int) -> dict:
    """The same row from an evaluate run's records (its first n questions, in sample order)."""
    spec = json.loads((run_dir / "spec.json").read_text())
    ids = [ex.id for ex in load_examples(spec["dataset"], spec["split"], n=n, seed=spec["seed"])]
    by_id = {record["id"]: record for record in read_records(records_file(run_dir))}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise SystemExit(f"{run_dir}: {len(missing)} of the first {n} questions are not done yet")
    records = [by_id[i] for i in ids]
    return row(spec["program"] + (f" ({spec['preset']})" if spec.get("preset") else ""), run_dir.name, records)


def row(label: str, source: str, records: list[dict]) -> dict:
    """The figures of one program from its per-question records."""
    n = len(records)
    total = lambda key: sum(r.get(key, 0) for r in records)  # noqa: E731
    by_signature: dict[str, list[int]] = {}
    for r in records:
        for sig, count in r.get("parse_attempts", {}).items():
            ok_total = by_signature.setdefault(sig, [0, 0])
            ok_total[0] += count - r.get("parse_failures", {}).get(sig, 0)
            ok_total[1] += count
    attempts = sum(t for _, t in by_signature.values())
    ok = sum(o for o, _ in by_signature.values())
    lm_seconds = [r.get("lm_seconds") for r in records]
    return {
        "program": label, "source": source, "n": n,
        "em": round(100 * total("em") / n, 1), "f1": round(100 * total("f1") / n, 1),
        "seconds_per_q": round(total("seconds") / n, 1), "lm_calls_per_q": round(total("lm_calls") / n, 1),
        "prompt_sent_per_q": round(total("prompt_tokens") / n),
        "prompt_computed_per_q": round((total("prompt_tokens") - total("prompt_tokens_cached")) / n),
        "completion_per_q": round(total("completion_tokens") / n),
        "parse_success": round(100 * ok / attempts, 2) if attempts else "not recorded",
        "parse_by_signature": {k: f"{o}/{t}" for k, (o, t) in sorted(by_signature.items())},
        "failed_calls": total("failed_calls"),
        "overhead_pct": (round(100 * (1 - sum(lm_seconds) / total("seconds")), 1)
                         if all(x is not None for x in lm_seconds) else "not recorded"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--programs", default="beam,tor")
    parser.add_argument("--adapter", choices=("auto", "json", "chat"), default="auto")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--from-runs", nargs="+", type=Path, help="summarise these evaluate runs instead")
    args = parser.parse_args()

    rows = []
    if args.from_runs:
        rows = [from_run(d, args.n) for d in args.from_runs]
    for name in [] if args.from_runs else args.programs.split(","):
        rows.append(measure(name, args.dataset, args.n, args.adapter, "nq" if name == "beam" else None))
        print(json.dumps(rows[-1]), flush=True)
    cols = ["program", "source", "n", "em", "f1", "seconds_per_q", "lm_calls_per_q", "prompt_sent_per_q",
            "prompt_computed_per_q", "completion_per_q", "parse_success", "failed_calls", "overhead_pct"]
    print("\n| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|")
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in cols) + " |")
    for row in rows:
        print(f"\n{row['program']} parse successes by signature: {row['parse_by_signature']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
