"""Samples by id: the questions a run asks, named by their official ids rather than by a
seeded draw, so they are the same from our subset files and from the official full files.

`--sample NAME` takes a committed list (`treeqa/data/samples/`, see `sample_ids`), `--ids FILE`
a list of your own; either selects exactly those questions, in that order. `draw` re-draws a
committed sample the way its figures drew it (the project's seeded `load_examples`).
"""

from __future__ import annotations

from pathlib import Path

import dspy

from treeqa.data.full_files import record_id
from treeqa.data.loaders import DataError, _read_records, load_examples, load_split, split_path
from treeqa.data.sample_ids import SampleError, read_ids, sample_ids, sample_info

__all__ = ["Selection", "draw", "select_by_ids", "selection"]


def select_by_ids(examples: list[dspy.Example], ids: list[str], where: str) -> list[dspy.Example]:
    """The examples named by `ids`, in that order; an id the split lacks is an error naming it."""
    by_id = {ex.id: ex for ex in examples}
    missing = [i for i in ids if i not in by_id]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(f"{where} has no question with id {missing[0]!r}{more}")
    return [by_id[i] for i in ids]


def load_by_ids(dataset: str, split: str, ids: list[str]) -> list[dspy.Example]:
    """The questions of `dataset`/`split` named by `ids`, in that order."""
    return select_by_ids(load_split(dataset, split), ids, f"{dataset} {split}")


class Selection:
    """Questions chosen by id: the ids, where they come from (a sample's name, or None for a
    file), and the dataset and split they belong to."""

    def __init__(self, ids: list[str], dataset: str, split: str, name: str | None = None) -> None:
        self.ids, self.dataset, self.split, self.name = ids, dataset, split, name


def selection(sample: str | None, ids_file: str | Path | None, dataset: str | None, split: str | None,
              option: str = "--sample") -> Selection | None:
    """What `--sample NAME` or `--ids FILE` select (None when neither is given). A sample knows
    its dataset and split: a --dataset or --split that says otherwise is refused. An id file
    takes the dataset and split given (None: the caller's default)."""
    if sample and ids_file:
        raise SampleError(f"{option} and {option.replace('sample', 'ids')} both name questions: give one")
    if ids_file:
        return Selection(read_ids(Path(ids_file)), dataset, split)
    if not sample:
        return None
    info = sample_info(sample)
    for what, given in (("dataset", dataset), ("split", split)):
        if given is not None and given != info[what]:
            raise SampleError(f"{option} {sample} is {info['dataset']} {info['split']}, not {what} {given}")
    return Selection(sample_ids(sample), info["dataset"], info["split"], sample)


def draw(name: str) -> list[str]:
    """The ids of committed sample `name` drawn again from the data folder as its index says
    (a seeded sample: `load_examples` with its seed, skip and n; a subset: every record)."""
    info = sample_info(name)
    drawn = info["drawn"]
    if drawn == "subset":
        return [record_id(rec) for _, rec in _read_records(split_path(info["dataset"], info["split"]))]
    examples = load_examples(info["dataset"], info["split"], n=drawn["n"], seed=drawn["seed"], skip=drawn["skip"])
    return [ex.id for ex in examples]
