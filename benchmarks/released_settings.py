"""The priced settings search behind ToR's default compile, run once and released as a record.

    python benchmarks/released_settings.py ids DIR       # the validation questions, one ids file a take
    bash benchmarks/released_settings.sh                 # the runs (hours on 2 cores), into RUNS
    python benchmarks/released_settings.py record RUNS > treeqa/teleprompt/released/tor.json

The questions are the released reader's validation questions (training questions held out of its
training by id, `treeqa.train.reads.is_validation`) whose paragraphs the corpus holds: its HotpotQA
evidence take is left out, its retrieval corpus has none of their paragraphs. Each candidate is
the main command's compiled ToR of that dataset with one search setting changed (`--param`), run
live, and rta runs the same questions on the same machine: the budget is a ratio of seconds a
question to rta's there. The record keeps the best EM among the candidates within the budget (ties
keep the program's own, the first), every candidate's pooled figures, and the paired differences.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from treeqa.evaluation.records import read_records, records_file
from treeqa.evaluation.stats import compare_records, run_intervals

PROGRAM = "tor"
OWN = "mpc"  # the compiled program's own setting: a tie keeps it
CANDIDATES = {"mpc": {"expansion": "mpc"}, "concat": {"expansion": "concat"}, "linked": {"expansion": "linked"},
              # the one search setting that put more gold in front of the reader on all three datasets'
              # development questions, at no LM call (benchmarks/search_reads.md)
              "root8-evidence2": {"expansion": "linked", "widths": [8, 3, 3], "max_evidence": 2},
              # the reader also reads the question's own retrieval (rta's reads) after the search's five:
              # MuSiQue's gold read 51.5 -> 65.9 on its development questions, the others as they were
              "root5": {"expansion": "linked", "read_root": 5},
              # eight of the question's own hits searched below, not five, the reads as many: more gold
              # read on HotpotQA and 2Wiki's development pools (+3.5, +3.0 points), MuSiQue's as they were
              "root8": {"expansion": "linked", "widths": [8, 3, 3]},
              # both: eight of the question's own hits searched below, and their first five read after
              # the search's five: more gold read than the compiled search on all three datasets'
              # development pools (+6.5, +3.5, +16.4 points, benchmarks/search_reads.md, 2026-12-05)
              "root8-root5": {"expansion": "linked", "widths": [8, 3, 3], "read_root": 5}}
BASELINE = "rta"
MAX_COST_RATIO = 2.0
TAKES = ("hotpotqa-train", "hotpotqa-dev", "2wikimultihopqa-train", "2wikimultihopqa-dev", "musique-train")
SAMPLE = ("the released reader's validation questions (held out of its training by id) whose paragraphs the "
          "corpus holds: HotpotQA train and the first 100 dev, 2Wiki train and the first 50 dev, MuSiQue train")


def write_ids(out: Path) -> dict[str, int]:
    """One file of question ids a take (`TAKES`): the validation questions of the reader's takes."""
    from treeqa.train.reads import TAKES as READER_TAKES
    from treeqa.train.reads import is_validation, take_examples

    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for take in READER_TAKES:
        name = f"{take.dataset}-{take.split}"
        if name not in TAKES:
            continue
        ids = [e.id for e in take_examples(take) if is_validation(e.id, 0.1)]
        (out / f"{name}.ids").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
        counts[name] = len(ids)
    return counts


def pooled(runs: Path, name: str) -> tuple[list[dict], list[dict]]:
    """(records of every take, each take's summary.json) of one candidate or the baseline."""
    records, summaries = [], []
    for take in TAKES:
        folder = runs / f"{take}-{name}"
        if not (folder / "summary.json").is_file():
            raise SystemExit(f"{folder}: no finished run (summary.json)")
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        wanted = CANDIDATES.get(name, {})
        got = summary["spec"].get("params", {})
        if any(got.get(k) != v for k, v in wanted.items()):
            raise SystemExit(f"{folder}: ran {({k: got.get(k) for k in wanted})}, not {wanted}")
        found = read_records(records_file(folder))
        if len(found) != summary["summary"]["n"]:
            raise SystemExit(f"{folder}: {len(found)} records, the summary counts {summary['summary']['n']}")
        records += [{**r, "id": f"{take}:{r['id']}"} for r in found]
        summaries.append(summary)
    return records, summaries


def figures(records: list[dict]) -> dict:
    seconds = sum(r["seconds"] for r in records) / len(records)
    return {"n": len(records), "em": round(100 * sum(r["em"] for r in records) / len(records), 2),
            "em_ci": run_intervals(records, keys=("em",))["em_ci"], "seconds_per_q": round(seconds, 2),
            "lm_calls_per_q": round(sum(r["lm_calls"] for r in records) / len(records), 2)}


def record(runs: Path) -> dict:
    base_records, base_summaries = pooled(runs, BASELINE)
    base = figures(base_records)
    machines = {json.dumps(s.get("machine"), sort_keys=True) for s in base_summaries}
    tried, pooled_records = [], {}
    for name, settings in CANDIDATES.items():
        records, summaries = pooled(runs, name)
        machines |= {json.dumps(s.get("machine"), sort_keys=True) for s in summaries}
        pooled_records[name] = records
        entry = {"settings": settings, **figures(records)}
        entry["cost_ratio"] = round(entry["seconds_per_q"] / base["seconds_per_q"], 2)
        entry["vs_" + BASELINE] = _paired(records, base_records)
        tried.append(entry)
    if len(machines) != 1:
        raise SystemExit(f"the runs come from {len(machines)} machines: a ratio of seconds needs one")
    for entry, name in zip(tried, CANDIDATES, strict=True):
        if name != OWN:
            entry["vs_" + OWN] = _paired(pooled_records[name], pooled_records[OWN])
    within = [t for t in tried if t["cost_ratio"] <= MAX_COST_RATIO]
    chosen = max(within, key=lambda t: t["em"]) if within else min(tried, key=lambda t: t["seconds_per_q"])
    return {"program": PROGRAM, "chosen": dict(chosen["settings"]), "tried": tried,
            "budget": {"baseline": BASELINE, "baseline_em": base["em"], "baseline_seconds_per_q": base["seconds_per_q"],
                       "max_cost_ratio": MAX_COST_RATIO, "within": bool(within)},
            "sample": f"{SAMPLE}: {base['n']} questions", "machine": json.loads(machines.pop()),
            "reader_sha256": _reader_sha256(runs),
            "command": "python benchmarks/released_settings.py record " + runs.as_posix()}


def _paired(a: list[dict], b: list[dict]) -> dict:
    em = compare_records(a, b, keys=("em",))["em"]
    return {k: em[k] for k in ("diff", "ci", "wins", "losses", "p_mcnemar", "verdict")}


def _reader_sha256(runs: Path) -> str | None:
    """The adapter the candidates read through: the one their compiled file (`--compiled`) records."""
    words = json.loads((runs / f"{TAKES[0]}-{OWN}" / "summary.json").read_text(encoding="utf-8"))["command"].split()
    compiled = Path(words[words.index("--compiled") + 1]) if "--compiled" in words else None
    if compiled is None or not compiled.is_file():
        return None
    return (json.loads(compiled.read_text(encoding="utf-8"))["treeqa"].get("adapter") or {}).get("sha256")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("ids", "record"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "ids":
        print(json.dumps(write_ids(Path(sys.argv[2]))))
    else:
        print(json.dumps(record(Path(sys.argv[2])), indent=1))
