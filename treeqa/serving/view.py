"""`treeqa view RUN_DIR`: one static HTML file for a finished evaluation or optimize run.

The file holds the summary and every question with its search tree, drawn by the same code
as the live page (`static/tree.js`, inlined, so the file opens anywhere without a server);
for an optimize run, both trees of each question and the questions compiling won and lost.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from treeqa.evaluation.records import read_records, records_file

STATIC = Path(__file__).parent / "static"
KEEP = ("id", "question", "answers", "prediction", "em", "f1", "recall@15", "lm_calls", "seconds", "tree", "error")


class PartialRecords(ValueError):
    """The page was written, but some records could not be read: it shows part of the run."""


def _records(folder: Path, skipped: list[str] | None = None) -> list[dict]:
    return [{k: r[k] for k in KEEP if k in r} for r in read_records(records_file(folder), skipped)]


def load_run(run_dir: str | Path, skipped: list[str] | None = None) -> dict:
    """The run's summary and records: {"title", "summary", "runs": {label: records}}; `skipped`
    gets a line for each part of a records file that could not be read."""
    run_dir = Path(run_dir)
    if (run_dir / "report.json").is_file():
        report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
        spec = report["spec"]
        if report["zero_shot"] is None:  # optimize --no-zero-shot: the compiled side alone
            return {"title": f"{spec['program']} on {spec['dataset']}: compiled ({spec['optimizer']})",
                    "summary": {"compiled": report["compiled"]},
                    "runs": {"compiled": _records(run_dir / "compiled", skipped)}}
        return {"title": f"{spec['program']} on {spec['dataset']}: zero-shot vs compiled ({spec['optimizer']})",
                "summary": {"zero-shot": report["zero_shot"], "compiled": report["compiled"],
                            "compiled vs zero-shot": report.get("compiled_vs_zero_shot")},
                "runs": {"zero-shot": _records(run_dir / "zero-shot", skipped),
                         "compiled": _records(run_dir / "compiled", skipped)}}
    if records_file(run_dir).is_file():
        summary = {}
        if (run_dir / "summary.json").is_file():
            summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        spec = summary.get("spec", {})
        title = f"{spec.get('program', 'run')} on {spec.get('dataset', '?')} {spec.get('split', '')}".strip()
        return {"title": title, "summary": {"run": summary.get("summary", {})},
                "runs": {"run": _records(run_dir, skipped)}}
    raise FileNotFoundError(f"{run_dir} holds neither report.json (optimize) nor predictions.jsonl(.gz) (evaluate)")


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="treeqa view">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body><header><h1>{title}</h1><p>written by <code>treeqa view</code></p></header>
<main style="display:block"><div id="summary"></div><div id="questions"></div></main>
<script>{js}</script>
<script>const RUN = {data};</script>
<script>{view_js}</script></body></html>
"""


VIEW_MARK = '<meta name="generator" content="treeqa view">'


def _is_view(path: Path) -> bool:
    """Whether `path` is a page this function wrote (VIEW_MARK in its head, before the styles)."""
    try:
        with path.open("rb") as fh:
            return VIEW_MARK.encode() in fh.read(512)
    except OSError:
        return False


def script_json(value) -> str:
    """`value` as JSON that cannot end or change its <script> element: every <, > and & escaped
    (a record's `</script>` or `<!--<script>` would otherwise close the element, or hide the rest
    of the page inside it)."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def write_view(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML file for a finished run (default: RUN_DIR/view.html) and return its path;
    where some records could not be read, the page is written and `PartialRecords` names them."""
    skipped: list[str] = []
    run = load_run(run_dir, skipped)
    out = Path(out) if out else Path(run_dir) / "view.html"
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder: name the HTML file to write")
    if out.exists() and not _is_view(out):
        raise ValueError(f"--out {out} exists and is not a page `treeqa view` wrote: refusing to overwrite it")
    out.write_text(PAGE.format(title=html.escape(run["title"]), css=(STATIC / "style.css").read_text(),
                               js=(STATIC / "tree.js").read_text(), view_js=(STATIC / "view.js").read_text(),
                               data=script_json(run)), encoding="utf-8")
    if skipped:
        shown = "\n  ".join(skipped[:10]) + (f"\n  and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        raise PartialRecords(f"wrote {out}, but it shows part of the run: these records could not be read\n  {shown}")
    return out
