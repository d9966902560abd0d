"""answer_hit@15 for runs recorded before evaluation kept it: whether any of the first 15
passages a program saw holds a gold answer (DPR's has-answer test; ALLIES' Table 3 compares
retrieve-then-answer and the beam this way, and on TriviaQA and WebQ, which annotate no gold
passage, it is the only retrieval figure).

    python benchmarks/answer_hits.py RUN_DIR [RUN_DIR ...] [--out FILE.md]

The passages come from what the records kept: a beam's states (their passages, in the order
the states were made), a step trace's nodes (their ids), and for rta, which keeps no tree, the
same retrieval again (the question's top k from the run's dense index; deterministic). Runs
recorded since the metric exists carry it and are read as they are. Loads the index and the
corpus, runs no LM.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean

from treeqa.data.answers import RECALL_K
from treeqa.data.corpus import load_corpus
from treeqa.evaluation.metrics import answer_hit_at_k
from treeqa.evaluation.records import read_records, records_file
from treeqa.retrievers import get_retriever

KEY = f"answer_hit@{RECALL_K}"


def _seen_ids(record: dict) -> list[str] | None:
    """The passage ids a record's tree shows, first seen first; None where it shows none."""
    tree = record.get("tree") or {}
    ids: list[str] = []
    if (tree.get("settings") or {}).get("evidence", "retrieval") != "retrieval":
        return None  # the beam with GENREAD evidence (or none) retrieves nothing
    if "states" in tree:
        for state in sorted(tree["states"], key=lambda s: s["id"]):
            ids += [p["id"] for p in state.get("passages", [])]
    elif "nodes" in tree and all("ids" in n for n in tree["nodes"]):
        for node in tree["nodes"]:
            ids += node["ids"]
    else:
        return None
    return list(dict.fromkeys(ids))


def hits_of(run_dir: Path) -> tuple[str, list[float] | None]:
    """The run's name and its per-question answer hits (questions it answered without an error);
    None for a run that retrieves nothing."""
    report = run_dir / "report.json"
    if report.is_file():
        spec = json.loads(report.read_text())["spec"]
    else:
        spec = json.loads((run_dir / "spec.json").read_text())
    records = read_records(records_file(run_dir / "compiled" if report.is_file() else run_dir))
    records = [r for r in records if not r.get("error")]
    if all(KEY in r for r in records):
        return run_dir.name, [r[KEY] for r in records]
    texts = {p.id: p.text for p in load_corpus(spec["dataset"])}
    if spec["program"] == "rta":
        k = int((spec.get("params") or {}).get("k", 5))
        retriever = get_retriever(spec["dataset"], build=False)
        return run_dir.name, [answer_hit_at_k([p.text for p in retriever.search(r["question"], k)], r["answers"],
                                              RECALL_K) for r in records]
    if records and (records[0].get("tree") or {}).get("settings", {}).get("evidence", "retrieval") != "retrieval":
        return run_dir.name, None
    hits = []
    for record in records:
        ids = _seen_ids(record)
        if ids is None:
            raise SystemExit(f"{run_dir}: record {record['id']} keeps no passages to read")
        hits.append(answer_hit_at_k([texts[i] for i in ids], record["answers"], RECALL_K))
    return run_dir.name, hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args()
    rows = ["| run | questions | answer_hit@15 |", "|---|---|---|"]
    for run_dir in args.runs:
        name, hits = hits_of(run_dir)
        figure = f"{len(hits)} | {100 * mean(hits):.1f}" if hits else "– | – (retrieves nothing)"
        rows.append(f"| {run_dir.parent.name}/{name} | {figure} |")
    table = "\n".join(rows)
    print(table)
    if args.out:
        intro = __doc__.split("\n\n")[0]
        args.out.write_text(f"# answer_hit@15 (`python benchmarks/answer_hits.py`)\n\n{intro}\n\n{table}\n")


if __name__ == "__main__":
    main()
