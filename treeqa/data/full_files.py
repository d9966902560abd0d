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


def subset_keep(dataset: str, split: str, path: Path, ours: str) -> list[str] | None:
    """The record ids to keep when reading `path` for a split whose own file is `ours`: None (every
    record) where `path` is our subset file, where TREEQA_FULL_SPLITS asks for all, or where no
    subset list is committed; else our subset's ids, in our order (an official full file)."""
    if path.name == Path(ours).name or get_settings().full_splits:
        return None
    ids_file = SAMPLES_DIR / f"{subset_name(dataset, split)}.txt"
    return read_ids(ids_file) if ids_file.is_file() else None


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
