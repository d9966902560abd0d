"""`make compare`: the programs side by side on a few HotpotQA dev questions, with the
embedded model and dense retrieval over the pooled corpus.

    python compare.py [--n 5] [--programs direct,rta,beam,tor]

Results (per-question predictions and summaries) go under runs/; a rerun resumes.
"""

from __future__ import annotations

import argparse

from treeqa.runs import EvalSpec, markdown_table, run_evaluation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5, help="HotpotQA dev questions (seeded sample)")
    parser.add_argument("--programs", default="direct,rta,beam,tor", help="comma-separated program names")
    args = parser.parse_args()

    rows = {}
    for name in args.programs.split(","):
        spec = EvalSpec(program=name.strip(), dataset="hotpotqa", split="dev", n=args.n,
                        preset="nq" if name.strip() == "beam" else None)
        result = run_evaluation(spec)
        rows[name] = result["summary"]
        print(f"\n{name}: written to {result['out']}")
    print("\n" + markdown_table(rows))


if __name__ == "__main__":
    main()
