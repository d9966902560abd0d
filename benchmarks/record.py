"""Record finished runs as a reproducibility file and refresh the benchmarks table.

    python benchmarks/record.py NAME RUN_DIR [RUN_DIR ...] [--note "..."]

Each RUN_DIR is a folder written by `treeqa evaluate` (summary.json) or `treeqa optimize`
(report.json). NAME.yaml gets, per run, the exact command, its settings and its figures,
like pyserini's regression files; README.md in this folder is rebuilt from every YAML here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

HERE = Path(__file__).parent
FIGURES = ["n", "em", "f1", "recall@15", "lm_calls_per_q", "prompt_tokens_per_q", "prompt_tokens_cached_per_q",
           "completion_tokens_per_q", "seconds_per_q", "parse_success", "failed_calls", "errors"]


def _entry(run_dir: Path) -> dict:
    if (run_dir / "report.json").is_file():
        report = json.loads((run_dir / "report.json").read_text())
        return {"kind": "optimize", "command": report["command"], "spec": report["spec"],
                "compile": report["compile"], "versions": report["versions"],
                "zero_shot": {k: report["zero_shot"][k] for k in FIGURES if k in report["zero_shot"]},
                "compiled": {k: report["compiled"][k] for k in FIGURES if k in report["compiled"]}}
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"kind": "evaluate", "command": summary["command"], "spec": summary["spec"],
            "versions": summary["versions"],
            "figures": {k: summary["summary"][k] for k in FIGURES if k in summary["summary"]}}


def _label(entry: dict) -> str:
    spec = entry["spec"]
    label = spec["program"] + (f" ({spec['preset']})" if spec.get("preset") else "")
    params = {k: v for k, v in (spec.get("params") or {}).items() if not k.startswith("_")}
    return label + (f" {params}" if params else "")


def rebuild_readme() -> None:
    rows = ["| file | program | dataset | setting | n | EM | F1 | R@15 | calls/q | s/q |", "|---" * 10 + "|"]
    for path in sorted(HERE.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for entry in doc["runs"]:
            spec = entry["spec"]
            dataset = f"{spec['dataset']} {spec.get('split', '')}".strip()
            variants = ([("", entry["figures"])] if entry["kind"] == "evaluate" else
                        [("zero-shot", entry["zero_shot"]), (f"compiled ({spec['optimizer']})", entry["compiled"])])
            for setting, fig in variants:
                rows.append(f"| {path.name} | {_label(entry)} | {dataset} | {setting} | {fig.get('n')} | "
                            f"{fig.get('em')} | {fig.get('f1')} | {fig.get('recall@15', '–')} | "
                            f"{fig.get('lm_calls_per_q')} | {fig.get('seconds_per_q')} |")
    (HERE / "README.md").write_text(
        "# Benchmarks\n\nEvery figure below was measured on a 2-core CPU with the embedded model "
        "(Qwen2.5-Coder-1.5B-Instruct Q4_K_M) unless the YAML says otherwise; each YAML file holds the exact "
        "commands, settings, versions and all figures. `lm_cost.md`, `engine_paths.md` and `foundation.md` are the speed "
        "benchmarks.\n\n" + "\n".join(rows) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    doc = {"note": args.note, "runs": [_entry(d) for d in args.runs]}
    (HERE / f"{args.name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110))
    rebuild_readme()
    print(f"wrote {HERE / (args.name + '.yaml')} and the table in {HERE / 'README.md'}")


if __name__ == "__main__":
    main()
