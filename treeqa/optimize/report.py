"""The report of an optimize run: `report.json` (every figure) and `report.md` (the tables)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from treeqa.evaluation.runs import versions
from treeqa.evaluation.stats import PAIRED_KEYS, compare_records
from treeqa.evaluation.tables import comparison_table, data_line, markdown_table, seconds_table
from treeqa.settings import recorded_command

# what a compiler recorded of its fit, as report.md names it
FITS = {"judge_fit": "judge fitted", "settings_search": "settings search", "reader_fit": "reader on recorded reads",
        "query_fit": "query writer on gold paths", "trained_reader_fit": "trained reader"}


def write_report(spec, out_dir: Path, splits: dict[str, str], compiled: dict, zero: dict | None,
                 compile_info: dict[str, Any], calls: dict[str, int], trainset_size: int,
                 baseline: dict | None = None, note: str | None = None) -> dict[str, Any]:
    """Write report.json and report.md for the compiled side and, when run, the zero-shot side
    paired with it on the same questions, and `--against`'s program (`baseline`) paired with
    both; returns the report, its table and the paired table."""
    rows = ({f"{spec.against}": baseline["summary"]} if baseline else {}) | (
        {f"{spec.program} zero-shot": zero["summary"]} if zero else {}) | {
        f"{spec.program} compiled ({spec.optimizer})": compiled["summary"]}
    table = markdown_table(rows) + "\n\nWhere the seconds go (a question's mean):\n\n" + seconds_table(rows)
    comparisons = {}
    if zero:
        comparisons["compiled vs zero-shot"] = compare_records(compiled["records"], zero["records"], keys=PAIRED_KEYS)
    if baseline:
        comparisons[f"compiled vs {spec.against}"] = compare_records(compiled["records"], baseline["records"],
                                                                     keys=PAIRED_KEYS)
        if zero:
            comparisons[f"zero-shot vs {spec.against}"] = compare_records(zero["records"], baseline["records"],
                                                                          keys=PAIRED_KEYS)
    paired = comparisons.get("compiled vs zero-shot")
    paired_table = comparison_table(comparisons) if comparisons else ""
    report = {"spec": spec.model_dump(), "splits": splits, "data": compiled["data"],
              "zero_shot": zero["summary"] if zero else None, "compiled": compiled["summary"],
              "compiled_vs_zero_shot": paired, "compile": compile_info, "plan": calls,
              "command": recorded_command(), "versions": versions(), "machine": compiled.get("machine")}
    if baseline:
        report["against"] = {"program": spec.against, "summary": baseline["summary"],
                             **{k: v for k, v in comparisons.items() if spec.against in k}}
    if note:
        report["note"] = note
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    (out_dir / "report.md").write_text(_markdown(spec, report, table, paired_table, splits, trainset_size))
    return {"report": report, "table": table, "paired_table": paired_table}


def _markdown(spec, report: dict, table: str, paired_table: str, splits: dict[str, str], trainset_size: int) -> str:
    zero = report["zero_shot"] is not None or "against" in report
    info = report["compile"]
    pairing = ("Paired on the same questions (95% paired-bootstrap interval; exact McNemar test on EM); "
               "'better' or 'worse' only when the interval excludes 0 and the McNemar test agrees "
               f"(p < 0.05):\n\n{paired_table}" if zero else
               "The zero-shot side was skipped (--no-zero-shot): pair the compiled records with a baseline run "
               "of the same questions.")
    fits = "".join(f"; {label}: {info[key]}" for key, label in FITS.items() if info.get(key))
    train_dataset = spec.train_from or spec.dataset
    return (f"# {spec.program} on {spec.dataset}: {'zero-shot vs ' if zero else ''}compiled ({spec.optimizer})\n\n"
            f"Command: `{report['command']}`\n\n{data_line(report['data'])}\n\n{table}\n\n{pairing}\n\n"
            + (f"{report['note']}\n\n" if report.get("note") else "") +
            f"Compiled on {trainset_size} {train_dataset} {splits['train']} questions in {info.get('seconds', '?')} s "
            f"({info.get('lm_calls', '?')} LM calls); demos per predictor: {info.get('demos', {})}; "
            f"instructions rewritten: {info.get('instructions_changed', [])}{fits}.\n"
            f"Versions: {report['versions']}\n")
