"""Record finished runs as a reproducibility file and refresh the results page.

    python benchmarks/record.py NAME RUN_DIR [RUN_DIR ...] [--pair tor:cor ...] [--note "..."] [--add]

Each RUN_DIR is a folder written by `treeqa evaluate` (summary.json) or `treeqa optimize`
(report.json). NAME.yaml gets, per run, the exact command, its settings and its figures
(EM and F1 with 95% bootstrap intervals), like pyserini's regression files, and for each
`--pair A:B` (runs named by their folder's name, optimize runs with their compiled records)
the paired comparison on their common questions. docs/results.md and the README's headline table
are rebuilt from every YAML here (`results_page.py`); README.md in this folder is written by hand and quotes them.
With `--add`, NAME.yaml keeps what it holds: the runs given replace their namesakes or join the end,
the note is appended, and a pair may name a run recorded beside the ones given (the same folder).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from treeqa.evaluation.records import read_records, records_file
from treeqa.evaluation.stats import compare_records, run_intervals

sys.path.insert(0, str(Path(__file__).resolve().parent))  # results_page beside it, however this is loaded
from results_page import write_pages  # noqa: E402 (docs/results.md and the README's table, from the YAMLs)

HERE = Path(__file__).parent
FIGURES = ["n", "em", "em_ci", "f1", "f1_ci", "recall@15", "recall@15_questions", "answer_hit@15", "lm_calls_per_q",
           "prompt_tokens_per_q", "prompt_tokens_cached_per_q", "completion_tokens_per_q", "seconds_per_q",
           "parse_success", "failed_calls", "errors"]


def _entry(run_dir: Path) -> dict:
    """One run's YAML entry; `run` is its folder's name, what `--pair` and the table call it (two
    runs of one program differ by it, and a folder renamed after its run by nothing else)."""
    name = run_dir.name
    if (run_dir / "report.json").is_file():
        report = json.loads((run_dir / "report.json").read_text())
        return {"kind": "optimize", "run": name, "command": report["command"], "spec": report["spec"],
                "compile": report["compile"], "versions": report["versions"],
                "zero_shot": ({k: report["zero_shot"][k] for k in FIGURES if k in report["zero_shot"]}
                              if report["zero_shot"] else None),  # None: optimize --no-zero-shot
                "compiled": {k: report["compiled"][k] for k in FIGURES if k in report["compiled"]}}
    kind = "evaluate"
    if not (run_dir / "summary.json").is_file() and (run_dir / "compiled" / "summary.json").is_file():
        kind, run_dir = "optimize, compiled side only (its zero-shot side unfinished)", run_dir / "compiled"
    summary = json.loads((run_dir / "summary.json").read_text())
    figures = {**summary["summary"], **run_intervals(read_records(records_file(run_dir)))}
    spec = summary["spec"]
    if kind != "evaluate" and (run_dir.parent / "spec.json").is_file():  # the optimize spec, not its side's
        spec = json.loads((run_dir.parent / "spec.json").read_text())
    return {"kind": kind, "run": name, "command": summary["command"], "spec": spec,
            "data": summary.get("data"), "versions": summary["versions"],
            "figures": {k: figures[k] for k in FIGURES if k in figures}}


def _records_of(run_dir: Path) -> Path:
    """A run's records: an evaluate run's own, an optimize run's compiled program's (also while
    its zero-shot side, which runs last, is unfinished), plain or compressed (`records_file`)."""
    if (run_dir / "report.json").is_file() or not records_file(run_dir).is_file():
        return records_file(run_dir / "compiled")
    return records_file(run_dir)


def _pairs(run_dirs: list[Path], pairs: list[str]) -> dict:
    """`A:B` -> the paired comparison of runs A and B (A's gain over B) on EM, F1 and, where
    both retrieve, recall@15. A run is named by its folder only: a program's name would be
    ambiguous between two runs of it (the beam with two evidence settings, a compiled ToR run
    with `evaluate --compiled`), and could pair a run with itself."""
    by_name = {run_dir.name: _records_of(run_dir) for run_dir in run_dirs}
    out = {}
    for pair in pairs:
        a, _, b = pair.partition(":")
        if a not in by_name or b not in by_name:  # a table still being filled: pair what exists
            print(f"--pair {pair}: skipped, not both among the runs ({', '.join(by_name)})")
            continue
        out[f"{a} vs {b}"] = compare_records(read_records(by_name[a]), read_records(by_name[b]),
                                             keys=("em", "f1", "recall@15", "answer_hit@15"))
    return out


def added(doc: dict, runs: list[Path], note: str, pairs: list[str]) -> dict:
    """`doc` (a YAML already written) with `runs` recorded in it: each replaces the entry of its
    name or joins the end, `note` follows the note, and each pair is compared, its runs found
    among `runs` or beside them (one sample's runs share a folder), so a table grows a row at a
    time without recording every run again."""
    entries = {entry["run"]: entry for entry in map(_entry, runs)}
    # an entry recorded before runs were named (no "run") is kept as it is: nothing can replace it
    kept = [entries.pop(entry["run"], entry) if "run" in entry else entry for entry in doc.get("runs", [])]
    doc = {**doc, "note": " ".join(filter(None, [doc.get("note", ""), note])), "runs": kept + list(entries.values())}
    if pairs:
        named = {name for pair in pairs for name in pair.split(":")}
        beside = [run.parent / name for name in named for run in runs[:1] if (run.parent / name).is_dir()]
        doc["comparisons"] = {**doc.get("comparisons", {}), **_pairs(list(dict.fromkeys(runs + beside)), pairs)}
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--note", default="")
    parser.add_argument("--pair", action="append", default=[], help="A:B, two programs among the runs to pair")
    parser.add_argument("--add", action="store_true", help="add the runs to NAME.yaml, keeping what it holds")
    args = parser.parse_args()
    path = HERE / f"{args.name}.yaml"
    if args.add:
        if not path.is_file():
            parser.error(f"--add: {path} does not exist; record its runs without --add first")
        doc = added(yaml.safe_load(path.read_text()), args.runs, args.note, args.pair)
    else:
        doc = {"note": args.note, "runs": [_entry(d) for d in args.runs]}
        if args.pair:
            doc["comparisons"] = _pairs(args.runs, args.pair)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110))
    print(f"wrote {HERE / (args.name + '.yaml')}")
    write_pages()  # docs/results.md and the README's table, from the same YAMLs


if __name__ == "__main__":
    main()
