"""The released reader's validation figures: its scores on the validation reads paired with the
base reader's on the same reads, and how often each says "yes" where the gold is yes or no.

    python benchmarks/released_reader.py SCORES BASE_SCORES > validation.json

SCORES and BASE_SCORES are `treeqa train score` files (one record a read). The validation reads
are training questions held out by id: the recipe was chosen on them, so these figures choose and
check, and claims are made on the unexamined dev samples only.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from treeqa.evaluation.stats import compare_records
from treeqa.train.reads import answer_class


def read_scores(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def yes_share(records: list[dict]) -> dict[str, dict]:
    """By dataset: yes/no reads, and the share of "yes" in the gold and in the predictions."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if answer_class(r["gold"]) != "other":
            by[r["dataset"]].append(r)
    return {d: {"reads": len(rs), "gold_yes": sum(answer_class(r["gold"]) == "yes" for r in rs),
                "said_yes": sum(answer_class(r["prediction"] or "") == "yes" for r in rs)}
            for d, rs in sorted(by.items())}


def validation(scores: list[dict], base: list[dict]) -> dict:
    paired = compare_records(scores, base, keys=("em", "f1"))
    mean = {key: round(100 * sum(r[key] for r in scores) / len(scores), 1) for key in ("em", "f1")}
    return {"reads": len(scores), "em": mean["em"], "f1": mean["f1"],
            "base_em": round(100 * sum(r["em"] for r in base) / len(base), 1),
            "em_vs_base": {k: paired["em"][k] for k in ("diff", "ci", "wins", "losses", "verdict")},
            "yes_no": yes_share(scores), "base_yes_no": yes_share(base),
            "sample": "the 118 validation reads of the training questions (one a question)"}


if __name__ == "__main__":
    print(json.dumps(validation(read_scores(Path(sys.argv[1])), read_scores(Path(sys.argv[2]))), indent=2))
