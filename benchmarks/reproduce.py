"""Does a run still reproduce a committed one? Compare two runs' records field by field.

A refactor that claims "behaviour unchanged" is checked by evaluating a few questions of a
committed reference run again (same compiled program, `--no-cache`) and comparing what the
program decided: the answer, EM/F1, recall@15, the LM calls and tokens, the parse counts, and
every node of the search tree (what was retrieved, reviewed, judged and accepted). Timings are
not compared. Prints one line per question and each field that differs; exits 1 on any.

    python benchmarks/reproduce.py REFERENCE_RUN NEW_RUN
"""

from __future__ import annotations

import sys
from pathlib import Path

from treeqa.evaluation.records import read_records, records_file

FIELDS = ("prediction", "em", "f1", "recall@15", "lm_calls", "prompt_tokens", "completion_tokens",
          "parse_attempts", "parse_failures", "failed_calls", "error")
NOT_COMPARED = ("seconds", "lm_seconds", "prompt_tokens_cached", "run")  # timings and bookkeeping


def records(run: Path) -> dict[str, dict]:
    """A run's records by id, from its predictions.jsonl or, once compressed, predictions.jsonl.gz."""
    path = records_file(run)
    if not path.is_file():
        raise SystemExit(f"error: {path} does not exist")
    return {record["id"]: record for record in read_records(path)}


def differences(old: dict, new: dict) -> list[str]:
    """The fields that differ, as 'field: old -> new' (tree nodes compared one by one)."""
    out = [f"{f}: {old.get(f)!r} -> {new.get(f)!r}" for f in FIELDS if old.get(f) != new.get(f)]
    old_nodes = (old.get("tree") or {}).get("nodes") or (old.get("tree") or {}).get("states") or []
    new_nodes = (new.get("tree") or {}).get("nodes") or (new.get("tree") or {}).get("states") or []
    if len(old_nodes) != len(new_nodes):
        out.append(f"tree: {len(old_nodes)} nodes -> {len(new_nodes)}")
    for i, (a, b) in enumerate(zip(old_nodes, new_nodes, strict=False)):  # a length change is reported above
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"tree node {i} {key}: {str(a.get(key))[:80]!r} -> {str(b.get(key))[:80]!r}")
    old_stats = {k: v for k, v in ((old.get("tree") or {}).get("stats") or {}).items() if k not in NOT_COMPARED}
    new_stats = {k: v for k, v in ((new.get("tree") or {}).get("stats") or {}).items() if k not in NOT_COMPARED}
    if old_stats != new_stats:
        out.append(f"tree stats: {old_stats} -> {new_stats}")
    return out


def main(reference: str, new: str) -> int:
    old_records, new_records = records(Path(reference)), records(Path(new))
    common = [i for i in new_records if i in old_records]
    if not common:
        raise SystemExit("error: the two runs share no question")
    differing = 0
    for qid in common:
        diff = differences(old_records[qid], new_records[qid])
        differing += bool(diff)
        print(f"{qid}: {'same' if not diff else f'{len(diff)} differences'}")
        for line in diff:
            print(f"    {line}")
    print(f"{len(common)} questions compared, {differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
