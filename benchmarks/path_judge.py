"""How well the compiled path judge (`treeqa.judging.path_judge`) separates annotated paths on
held-out dev questions, next to what the LLM's own verdict probabilities achieved.

    python benchmarks/path_judge.py [--datasets hotpotqa musique 2wikimultihopqa] [--train 100] [--dev 100]
                                    [--out benchmarks/path_judge.md]

For each dataset: fit on `--train` seeded train questions (exactly what `--optimizer
path-judge` does), then score the paths built the same way from `--dev` seeded dev questions
(seed 0: for HotpotQA these are the reference table's 100 questions). No LM call; the
encoder is the retriever's (MiniLM). Prints a markdown table and writes it to `--out`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from treeqa.data import load_examples
from treeqa.judging.path_judge import FEATURES
from treeqa.optimize import splits_for
from treeqa.retrievers.dense import embed
from treeqa.teleprompt.path_judge_fit import fit_path_judge, judge_figures


def one(dataset: str, n_train: int, n_dev: int, seed: int) -> dict:
    train_split, dev_split = splits_for(dataset)
    train = load_examples(dataset, train_split, n=n_train, seed=seed)
    dev = load_examples(dataset, dev_split, n=n_dev, seed=seed)
    started = time.perf_counter()
    judge, fit = fit_path_judge(train, embed, seed)
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    held_out = judge_figures(judge, dev, embed, seed)
    return {"dataset": dataset, "train": len(train), "dev": len(dev), "fit": fit, "dev_figures": held_out,
            "fit_seconds": round(fit_seconds, 1), "dev_seconds": round(time.perf_counter() - started, 1),
            "coef": {"relevance": judge.relevance.coef, "sufficiency": judge.sufficiency.coef}}


def markdown(results: list[dict], command: str) -> str:
    lines = [
        "# The path judge on held-out questions",
        "",
        f"Command: `{command}`. The judge is fitted on train paths built from the annotations "
        "(no LM call) and scored on dev paths built the same way: every gold paragraph alone, "
        "partial and full gold paths, distractors alone and spliced into gold paths "
        "(`treeqa.teleprompt.path_judge_fit.judge_cases`). Relevance: is the newest paragraph of the path gold; "
        "sufficiency: does the path hold every gold paragraph. Recall and specificity at the thresholds "
        "fitted on train (relevance: the cut that keeps 90% of gold paragraphs in cross-validation; "
        "sufficiency: the best balanced accuracy).",
        "",
        "| dataset | train q | train paths | relevance AUC (train, 5-fold) | sufficiency AUC (train, 5-fold) "
        "| dev q | dev paths | relevance AUC (dev) | relevance recall / specificity (dev) | sufficiency AUC (dev) "
        "| sufficiency recall / specificity (dev) | fit s | dev s |",
        "|---" * 13 + "|",
    ]
    for r in results:
        f, d = r["fit"], r["dev_figures"]
        lines.append(f"| {r['dataset']} | {r['train']} | {f['cases']} | {f['relevance_auc_cv']} | "
                     f"{f['sufficiency_auc_cv']} | {r['dev']} | {d['cases']} | {d['relevance']['auc']} | "
                     f"{d['relevance']['recall']} / {d['relevance']['specificity']} | {d['sufficiency']['auc']} | "
                     f"{d['sufficiency']['recall']} / {d['sufficiency']['specificity']} | {r['fit_seconds']} | "
                     f"{r['dev_seconds']} |")
    lines += ["", "Weights on the standardised features (positive: more likely):", "",
              "| dataset | decision | " + " | ".join(FEATURES) + " |", "|---" * (len(FEATURES) + 2) + "|"]
    for r in results:
        for decision, coef in r["coef"].items():
            lines.append(f"| {r['dataset']} | {decision} | " + " | ".join(f"{c:+.2f}" for c in coef) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    import shlex
    import sys

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["hotpotqa", "musique", "2wikimultihopqa"])
    parser.add_argument("--train", type=int, default=100)
    parser.add_argument("--dev", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = [one(d, args.train, args.dev, args.seed) for d in args.datasets]
    table = markdown(results, shlex.join(["python", *sys.argv]))
    print(table)
    if args.out:
        args.out.write_text(table)


if __name__ == "__main__":
    main()
