"""EM of a ToR run and a baseline by the dataset's question type, and on the questions where the
run accepted a path holding every gold paragraph (a look after the fact, not a test).

    python benchmarks/by_type.py RUN_DIR BASELINE_DIR DATA_FILE.json

DATA_FILE is the set's own JSON (HotpotQA and 2Wiki records carry `_id` and `type`). Reads the
runs' records and trees; no LM, no index.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from treeqa.data import load_examples
from treeqa.evaluation.records import read_records, records_file


def accepted_full_path(record: dict, gold: set[str]) -> bool:
    nodes = {n["node"]: n for n in record["tree"]["nodes"]}

    def path_ids(node):
        ids = set()
        while node is not None:
            if nodes[node]["id"]:
                ids.add(nodes[node]["id"])
            node = nodes[node]["parent"]
        return ids

    return bool(gold) and any(gold <= path_ids(n["node"]) for n in nodes.values() if n["action"] == "accept")


def main(run_dir: str, base_dir: str, data_file: str) -> None:
    types = {d["_id"]: d["type"] for d in json.loads(Path(data_file).read_text(encoding="utf-8"))}
    spec = json.loads((Path(run_dir) / "spec.json").read_text())
    gold = {ex.id: set(ex.get("gold_ids") or []) for ex in load_examples(
        spec["dataset"], spec["split"], n=spec["n"], seed=spec["seed"], skip=spec.get("skip", 0))}
    base = {r["id"]: r for r in read_records(records_file(base_dir))}
    rows = defaultdict(lambda: [0, 0.0, 0.0, 0, 0])  # n, EM run, EM base, won, lost
    for r in read_records(records_file(run_dir)):
        b = base.get(r["id"])
        if b is None:
            continue
        keys = [f"type {types[r['id']]}"]
        if r.get("tree") and accepted_full_path(r, gold[r["id"]]):
            keys.append("accepted a full gold path")
        for key in keys + ["all"]:
            row = rows[key]
            row[0] += 1
            row[1] += r["em"]
            row[2] += b["em"]
            row[3] += r["em"] > b["em"]
            row[4] += r["em"] < b["em"]
    print(f"| questions ({run_dir} vs {base_dir}) | n | right (run) | right (baseline) | won | lost |")
    print("|---|---|---|---|---|---|")
    for key, (n, a, b, won, lost) in sorted(rows.items()):
        print(f"| {key} | {n} | {a:g} | {b:g} | {won} | {lost} |")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
