"""The decisions of finished ToR / CoR / beam runs, against the annotations.

    python benchmarks/decisions.py RUN_DIR [RUN_DIR ...] [--out benchmarks/decisions.md]

Each RUN_DIR is a `treeqa evaluate` folder (spec.json + predictions.jsonl or .jsonl.gz). The gold
paragraphs come from the run's own questions (dataset, split, n and seed of its spec). See
`treeqa/evaluation/decisions.py` for what each figure means.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from treeqa.data import load_examples
from treeqa.evaluation.decisions import decisions, percent
from treeqa.evaluation.records import read_records, records_file


def figures_of(run_dir: Path) -> tuple[dict, dict | None]:
    spec = json.loads((run_dir / "spec.json").read_text())
    examples = load_examples(spec["dataset"], spec["split"], n=spec["n"], seed=spec["seed"], skip=spec.get("skip", 0))
    gold = {ex.id: ex.get("gold_ids") or [] for ex in examples}
    records = read_records(records_file(run_dir))
    strangers = [r["id"] for r in records if r["id"] not in gold]
    if strangers:  # questions of another sample would be scored against no gold at all
        raise SystemExit(f"{run_dir}: {len(strangers)} records are not questions of its spec's sample "
                         f"(e.g. {strangers[0]})")
    figures = decisions(spec["program"], records, gold) if records else None
    if run_dir.name == "compiled":  # an optimize run's compiled side: named by its folder
        spec = {**spec, "label": f"{spec['program']} compiled ({run_dir.parent.name})"}
    elif (spec.get("params") or {}).get("_repicked_from"):  # `treeqa repick`: named by its folder
        spec = {**spec, "label": f"{spec['program']} ({run_dir.name}, pick={spec['params']['pick']})"}
    elif (spec.get("params") or {}).get("path_judge"):  # `evaluate --compiled`: named by its folder
        spec = {**spec, "label": f"{spec['program']} compiled ({run_dir.name})"}
    # a run with `--param name=value` (pick=vote, threshold=1.0, ...) is named with what it overrode,
    # so it is not mistaken for the default run of the same program
    overrides = [f"{name}={value}" for name, value in (spec.get("params") or {}).items()
                 if not name.startswith("_") and name != "path_judge" and not (name == "pick" and value == "beam")
                 and f"{name}=" not in spec.get("label", "")]
    if overrides:
        base = spec.get("label") or spec["program"] + (f" ({spec['preset']})" if spec.get("preset") else "")
        spec = {**spec, "label": ", ".join([base, *overrides])}
    return spec, (figures | {"n": len(records)} if figures is not None else None)


def _auc(f: dict, verdict: str) -> str:
    return f"{f.get(f'{verdict}_auc') or '–'} / {f.get(f'judge_{verdict}_auc') or '–'}"


def markdown(rows: list[tuple[dict, dict]]) -> str:
    lines = ["| run | n | reviews | accept / search / reject | accept precision | accepted on full paths | "
             "search on partial paths | reject on distractors | questions with an expansion | deepest node | "
             "AUC relevant (model / judge) | AUC sufficient (model / judge) |",
             "|---" * 12 + "|"]
    beams = ["| run | n | stop reasons | last beam depth | top two tied | states | Brier | ECE | "
             "mean confidence | state EM | right answer in the tree | returned when in the tree |", "|---" * 12 + "|"]
    for spec, f in rows:
        label = spec.get("label") or spec["program"] + (f" ({spec['preset']})" if spec.get("preset") else "")
        if "score_calibration" in f:
            cal = f["score_calibration"]
            beams.append(f"| {label} | {f['n']} | {f['stop_reasons']} | {f['last_beam_depth_histogram']} | "
                         f"{percent(f['top_two_tied'])} | {cal['states']} | {cal['brier']} | {cal['ece']} | "
                         f"{cal.get('mean_confidence')} | {cal.get('accuracy')} | {percent(f.get('right_in_tree'))} | "
                         f"{percent(f.get('right_returned_when_in_tree'))} |")
        else:
            a = f["actions"]
            lines.append(f"| {label} | {f['n']} | {f['reviews']} | {a['accept']} / {a['search']} / {a['reject']} | "
                         f"{percent(f['accept_precision'])} | {percent(f['accept_rate_on_full_paths'])} | "
                         f"{percent(f['search_rate_on_partial_paths'])} | {percent(f['reject_rate_on_distractors'])} | "
                         f"{percent(f['questions_with_expansion'])} | {f['depth_histogram']} | "
                         f"{_auc(f, 'relevance')} | {_auc(f, 'sufficiency')} |")
    tables = [table for table in (lines, beams) if len(table) > 2]  # a kind no run has is left out
    return "\n\n".join("\n".join(table) for table in tables) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = [(spec, f) for spec, f in map(figures_of, args.runs) if f is not None]
    table = markdown(rows)
    print(table)
    if args.out:
        args.out.write_text("# Search decisions against the annotations\n\n"
                            "Computed by `python benchmarks/decisions.py "
                            + " ".join(str(r) for r in args.runs) + "` from the runs' recorded trees. A *full* "
                            "path holds every gold paragraph, a *partial* one some; a *distractor* is a node whose "
                            "own paragraph is not gold (CoR: a turn that saw no gold paragraph). Beam: Score's "
                            "confidence of every answered state against that state's EM; *right answer in the "
                            "tree*: questions where some answered state was right, and the share of those whose "
                            "returned answer was right.\n\n" + table)


if __name__ == "__main__":
    main()
