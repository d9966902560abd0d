"""What the reader of the compiled ToR gets to read, under search settings that cost no LM call.

    python benchmarks/search_reads.py [--variant NAME="k=v;k=v" ...] [--n N] > benchmarks/search_reads.md

Why: with `expansion=linked` and the path judge, ToR's search makes no LM call; only its reader
does. So a search setting (widths, depth, hops, read_top, max_evidence) can be chosen by what it
puts in front of the reader, measured without the LM on hundreds of questions: the share of the
gold paragraphs among the paragraphs read (the first five distinct of the accepted evidence, then
the best of the rest), and the questions whose gold paragraphs are all read. Each dataset's
compiled file is the main command's (`benchmarks/runs/*/tor-priced-compile/compiled.json`).

The questions are development questions, none of a claim sample: HotpotQA's 100 reference dev
questions, 2Wiki train 350-449 of the seeded order (outside the fresh sample 150-349), MuSiQue's
100 train questions (the path judge of MuSiQue was fitted on their annotations, so its figures
there flatter every variant alike).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COMPILED = {"hotpotqa": "hotpotqa-dev-unexamined-skip100-n197",
            "2wikimultihopqa": "2wikimultihopqa-dev-unexamined-skip50-n100",
            "musique": "musique-dev-unexamined-skip0-n100"}
TAKES = {"hotpotqa": ("dev", 0), "2wikimultihopqa": ("train", 350), "musique": ("train", 0)}
VARIANTS = {"compiled": {}}  # always measured, the others beside it


def parse_variant(text: str) -> tuple[str, dict]:
    """NAME=key=value;key=value, the values read as JSON (a list for widths)."""
    name, _, rest = text.partition("=")
    changes = {}
    for part in filter(None, rest.split(";")):
        key, _, value = part.partition("=")
        changes[key] = json.loads(value)
    return name, changes


def read_ids(program, question: str) -> tuple[list[str], set[str], float]:
    """The ids of the paragraphs the reader would read (`passages_read` of them: five, and the
    root's paragraphs with `read_root`), of every paragraph the search retrieved (what a better
    reading could reach), and the search's seconds."""
    from treeqa.signatures.fusion import distinct_paragraphs

    start = time.perf_counter()
    run = program.search_tree(question)
    pool, _ = program.reading(run)
    read = [p.id for p in distinct_paragraphs(pool)[:program.passages_read]]
    return read, {p.id for p in run.retrieved}, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", default=[], help="NAME=key=json;key=json")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--skip", type=int, default=None, help="start elsewhere than TAKES' questions")
    parser.add_argument("--datasets", default=",".join(COMPILED))
    parser.add_argument("--lm", default=None, help="an LM for variants whose search calls one "
                        "(expansion=bridge names an entity): e.g. local; none by default")
    args = parser.parse_args()
    variants = dict(VARIANTS)
    variants.update(parse_variant(v) for v in args.variant)

    import dspy

    import treeqa
    from treeqa.data.loaders import load_examples

    if args.lm:
        treeqa.configure(args.lm)
    else:
        dspy.configure(lm=None)  # a variant that would call the LM fails loudly instead of costing hours
    print("| dataset | variant | questions | gold read (share) | vs compiled, paired | all gold read "
          "| all gold retrieved | search s a question | paragraphs read | of them gold |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dataset in args.datasets.split(","):
        split, skip = TAKES[dataset]
        skip = skip if args.skip is None else args.skip
        examples = [e for e in load_examples(dataset, split, n=args.n, skip=skip) if e.get("gold_ids")]
        path = ROOT / "benchmarks/runs" / COMPILED[dataset] / "tor-priced-compile/compiled.json"
        compiled_shares = None
        for name, changes in variants.items():
            program = treeqa.load_program(path, overrides=changes or None, expect="tor")
            if program.fusion != "passages":  # read_ids counts what the passages reader reads, nothing else
                raise SystemExit(f"{path}: its reader reads fusion={program.fusion!r}; counted: passages only")
            shares, whole, reachable, seconds, read, read_gold = [], 0, 0, 0.0, 0, 0
            for e in examples:
                ids, retrieved, s = read_ids(program, e.question)
                gold = set(e.gold_ids)
                found = len(gold & set(ids))
                shares.append(found / len(gold))
                whole += found == len(gold)
                reachable += gold <= retrieved
                seconds += s
                read += len(ids)
                read_gold += found
            n = len(examples)
            compiled_shares = compiled_shares or shares
            print(f"| {dataset} {split} {skip}-{skip + args.n - 1} | {name} {json.dumps(changes) if changes else ''} | "
                  f"{n} | {100 * sum(shares) / n:.1f} | {paired(shares, compiled_shares)} | {100 * whole / n:.1f} | "
                  f"{100 * reachable / n:.1f} | {seconds / n:.2f} | {read / n:.1f} | "
                  f"{100 * read_gold / max(read, 1):.1f}% |", flush=True)


def paired(shares: list[float], compiled: list[float]) -> str:
    """The difference in gold-read share against the compiled setting on the same questions, with
    its paired bootstrap interval (points), and the questions it read more and less gold on."""
    from treeqa.evaluation.stats import paired_comparison

    if shares is compiled:
        return ""
    cmp = paired_comparison(shares, compiled)
    low, high = (100 * c for c in cmp["ci"])
    return f"{100 * cmp['diff']:+.1f} [{low:+.1f}, {high:+.1f}], {cmp['wins']} more, {cmp['losses']} less"


if __name__ == "__main__":
    main()
