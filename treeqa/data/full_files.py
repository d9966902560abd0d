"""Reading a split from an official FULL file in place of our subset copy.

Our multi-hop splits are subsets of the official files (e.g. 297 of HotpotQA's 7,405 dev
questions). Seeded samples ("skip 100, n 197") and the pooled corpus depend on exactly which
records a split holds and in what order, so a data folder that has the official file instead
reads it cut to our subset's records (their committed ids, in our order): the same questions,
samples and corpus as ours. `TREEQA_FULL_SPLITS=1` reads every record of the full file instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from treeqa.data.sample_ids import SAMPLES_DIR, read_ids, subset_name
from treeqa.settings import get_settings

# (dataset, split) -> the official full file, as its source names it, in the data folder's layout
OFFICIAL_FULL: dict[tuple[str, str], str] = {
    ("hotpotqa", "dev"): "hotpotqa/hotpot_dev_distractor_v1.json",
    ("hotpotqa", "train"): "hotpotqa/hotpot_train_v1.1.json",
    ("2wikimultihopqa", "dev"): "2wikimultihopqa/dev.json",
    ("2wikimultihopqa", "train"): "2wikimultihopqa/train.json",
    ("musique", "dev"): "musique/musique_ans_v1.0_dev.jsonl",
    ("musique", "train"): "musique/musique_ans_v1.0_train.jsonl",
}


def split_source(dataset: str, split: str, subset_path: Path, root: Path) -> tuple[Path, list[str] | None]:
    """(the file to read, the record ids to keep or None for all): our subset file where it is
    there, else the official full file cut to our subset's ids (all of it with TREEQA_FULL_SPLITS)."""
    official = OFFICIAL_FULL.get((dataset, split))
    if subset_path.is_file() or official is None or not (root / official).is_file():
        return subset_path, None
    if get_settings().full_splits:
        return root / official, None
    return root / official, read_ids(SAMPLES_DIR / f"{subset_name(dataset, split)}.txt")


def record_id(record: Any) -> str | None:
    """The official id of a multi-hop record (HotpotQA, 2Wiki: `_id`; MuSiQue: `id`)."""
    if not isinstance(record, dict):
        return None
    found = record.get("_id", record.get("id"))
    return None if found is None else str(found)


def cut_to_ids(records: Iterable[tuple[str, Any]], keep: list[str], path: Path,
               error: type[Exception] = ValueError) -> list[tuple[str, Any]]:
    """The (where, record) pairs whose id is in `keep`, in `keep`'s order; a kept id the file
    lacks means it is not the official file we name, and is an error naming it."""
    wanted = set(keep)
    found: dict[str, tuple[str, Any]] = {}
    for where, record in records:
        rid = record_id(record)
        if rid in wanted and rid not in found:
            found[rid] = (where, record)
    missing = [i for i in keep if i not in found]
    if missing:
        raise error(f"{path} lacks {len(missing)} of the {len(keep)} records our subset holds (first: "
                    f"{missing[0]!r}): is it the official file?")
    return [found[i] for i in keep]
