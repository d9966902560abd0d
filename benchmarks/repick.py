"""A finished beam run's answers picked again from its recorded trees, with no LM call.

    python benchmarks/repick.py RUN_DIR OUT_DIR [--pick vote]

`pick` (BeamSearchQA's setting) decides only which state answers, never the search: the states,
their answers and confidences, the beams and the stop do not depend on it. So the trees a run
recorded are the trees a run with the other pick makes (the embedded model decodes greedily,
the prompts are the same), and OUT_DIR gets the records of that run: each question's answer,
EM and F1 from the state the program's own rule (`voted`) picks, `tree.best` and
`tree.settings.pick` set to match, everything else (calls, tokens, seconds, recall) the source
run's. Its spec.json is the source's with `pick` added and `_repicked_from` naming the source;
its summary.json says the command that made it. `record.py` and `decisions.py` read it like any
evaluate folder. RUN_DIR may be an evaluate folder or an optimize run's `compiled` side.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from treeqa.evaluation.metrics import exact_match, f1_score
from treeqa.evaluation.records import RECORDS_NAME, read_records, records_file, summarize
from treeqa.evaluation.runs import versions
from treeqa.programs.beam_search import PICKS, SearchState, voted

STATE_FIELDS = {f.name for f in dataclasses.fields(SearchState)} - {"passages"}


def repicked(record: dict, pick: str) -> dict:
    """The record as a run with `pick` would have written it (see the module doc)."""
    tree = record.get("tree")
    if not tree or "states" not in tree:  # a question that failed before any tree: nothing to pick from
        return record
    states = [SearchState(**{k: v for k, v in s.items() if k in STATE_FIELDS}) for s in tree["states"]]
    by_id = {s.id: s for s in states}
    last_beam = (tree.get("beams") or [[]])[-1]  # ranked, most confident first
    best = by_id.get(last_beam[0]) if last_beam else None  # the paper's pick (line 26)
    if pick == "vote":
        best = voted(states, prefer=best) or best
    answer = best.answer if best is not None else ""
    new_tree = {**tree, "best": best.id if best is not None else None,
                "settings": {**tree.get("settings", {}), "pick": pick}}
    return {**record, "prediction": answer, "em": exact_match(answer, record["answers"]),
            "f1": round(f1_score(answer, record["answers"]), 4), "tree": new_tree}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pick", choices=PICKS, default="vote")
    args = parser.parse_args(argv)
    spec_path = args.run / "spec.json"
    if not spec_path.is_file() and (args.run.parent / "spec.json").is_file():  # an optimize run's side
        spec_path = args.run.parent / "spec.json"
    spec = json.loads(spec_path.read_text())
    if spec.get("program") != "beam":
        raise SystemExit(f"{args.run}: a {spec.get('program')!r} run; only beam runs have a pick")
    records = read_records(records_file(args.run))
    if not records:
        raise SystemExit(f"{args.run}: no records to pick from")
    args.out.mkdir(parents=True, exist_ok=True)
    if records_file(args.out).exists():  # plain or compressed
        raise SystemExit(f"{args.out} already holds records: pick into a new folder")
    out_records = [repicked(r, args.pick) for r in records]
    with open(args.out / RECORDS_NAME, "w") as f:
        for record in out_records:
            f.write(json.dumps(record) + "\n")
    params = {**(spec.get("params") or {}), "pick": args.pick, "_repicked_from": str(args.run)}
    spec = {**spec, "params": params}
    (args.out / "spec.json").write_text(json.dumps(spec, indent=2))
    source = json.loads((args.run / "summary.json").read_text()) if (args.run / "summary.json").is_file() else {}
    summary = {"summary": summarize(out_records), "spec": spec, "data": source.get("data"),
               "command": "python benchmarks/repick.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "versions": versions()}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    changed = sum(a.get("prediction") != b.get("prediction") for a, b in zip(records, out_records, strict=True))
    em_from, em_to = (100 * sum(r["em"] for r in rs) / len(rs) for rs in (records, out_records))
    print(f"{len(records)} records, {changed} answers changed; EM {em_from:.1f} -> {em_to:.1f}; written to {args.out}")


if __name__ == "__main__":
    main()
