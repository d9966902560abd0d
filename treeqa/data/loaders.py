"""Benchmark questions as `dspy.Example`s, read from the official file layouts.

Every example has `id`, `question`, `answers` (all gold strings) and, for the multi-hop
sets and the NQ test questions whose gold passage is in the corpus, `gold_ids` (corpus ids of
the supporting paragraphs, what recall@k counts) and `gold_titles` (their titles); `question`
is the only input. A gold answer that normalises
to nothing (e.g. "The") could only ever match an empty prediction, so it is dropped with a
warning, and a record left without any gold answer is skipped with a warning naming file
and record.
Files are looked for in the data dir (`TREEQA_DATA_DIR`, else `../shared/data`), then in the
user data folder `treeqa data get` fills (`treeqa.data.folders`); with `TREEQA_ALLOW_HUB=1` a
dataset that is not local comes from the Hugging Face hub. Each dataset is one file in
`treeqa/data/datasets/` that registers it here, with the layouts (parsers) of its files.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import random
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dspy

from treeqa.data.answers import normalize_answer
from treeqa.data.folders import data_roots, find_file
from treeqa.data.full_files import cut_to_ids, subset_keep
from treeqa.data.passage import clean_whitespace, passage_id
from treeqa.registry import Registry
from treeqa.settings import get_settings

log = logging.getLogger(__name__)


class DataError(ValueError):
    """A data file is missing or a record in it is malformed."""


@dataclass(frozen=True)
class SplitFile:
    """A split's file, relative to a data folder, and its layout (a name in LAYOUTS). `official`:
    the official file's name where ours is a subset of it or named otherwise (what `treeqa data
    get` writes), read when ours is absent, in `official_layout` (default: the same layout)."""

    path: str
    layout: str
    official: str | None = None
    official_layout: str | None = None

    def candidates(self) -> list[tuple[str, str]]:
        """(path, layout) in the order they are looked for: ours, then the official file."""
        ours = [(self.path, self.layout)]
        return ours + [(self.official, self.official_layout or self.layout)] if self.official else ours


@dataclass(frozen=True)
class Layout:
    """How one official file layout is read: `parse(record, where) -> Example`, and for the
    multi-hop layouts `paragraphs(record) -> (title, text)...`, what its corpus pools."""

    name: str
    parse: Callable[[Any, str], dspy.Example]
    paragraphs: Callable[[dict], Iterator[tuple[str, str]]] | None = None


@dataclass(frozen=True)
class HubSource:
    """Where the Hugging Face hub has a dataset (read with `TREEQA_ALLOW_HUB=1` when its file is
    not local): path, config, {our split: hub split} and the converter of one row to an example."""

    path: str
    config: str | None
    splits: Mapping[str, str]
    convert: Callable[[dict, int], dspy.Example]


@dataclass(frozen=True)
class Dataset:
    """One benchmark: its split files (official layouts), the split it is evaluated on by default
    (the one the papers report), where the hub has it, and what the examples read from a split's
    file get after reading (`after_read(split, examples, data dir)`, e.g. NQ test: its gold passages)."""

    name: str
    splits: Mapping[str, SplitFile]
    eval_split: str
    hub: HubSource | None = None
    after_read: Callable[[str, list[dspy.Example]], list[dspy.Example]] | None = None
    corpus: str = "pooled"  # "pooled": every paragraph of its files; "open": the open-domain corpus

    def __post_init__(self):
        object.__setattr__(self, "splits", MappingProxyType(dict(self.splits)))  # read-only
        if self.eval_split not in self.splits:
            raise ValueError(f"{self.name}: its evaluation split {self.eval_split!r} is not one of its splits")
        if self.corpus not in ("pooled", "open"):
            raise ValueError(f"{self.name}: corpus must be 'pooled' or 'open', not {self.corpus!r}")

    def split_file(self, split: str) -> SplitFile:
        """The file of `split`; an unknown split is a `DataError` naming the dataset's splits."""
        if split not in self.splits:
            raise DataError(f"{self.name} has no split {split!r}; available: {', '.join(self.splits)}")
        return self.splits[split]


# name -> Dataset, in the order registered (each file of treeqa/data/datasets registers its own)
REGISTRY: Registry[Dataset] = Registry("dataset", error=DataError)
# layout name -> Layout: the parsers, registered by the dataset files that own them
LAYOUTS: Registry[Layout] = Registry("file layout", error=DataError)


def register_layout(layout: Layout) -> Layout:
    """Offer a file layout by name (`SplitFile.layout`)."""
    return LAYOUTS.register(layout.name, layout)


def register(dataset: Dataset) -> Dataset:
    """Offer a dataset by its name (`--dataset`); a name another dataset holds is refused."""
    return REGISTRY.register(dataset.name, dataset)


def get_dataset(name: str) -> Dataset:
    """The dataset `name`; an unknown name is a `DataError` naming every dataset."""
    return REGISTRY.lookup(name)


# read-only views of the registry, live: dataset -> {split: SplitFile}, the names, dataset -> the
# split evaluated by default
SPLITS: Mapping[str, Mapping[str, SplitFile]] = REGISTRY.view(lambda d: d.splits)
DATASETS = REGISTRY.keys()
EVAL_SPLITS: Mapping[str, str] = REGISTRY.view(lambda d: d.eval_split)

# NQ-open test questions with their gold DPR passage (lost-in-the-middle's oracle file): the
# open-domain corpus holds these passages, and the NQ test questions listed here get them as gold.
NQ_GOLD_PASSAGES = "nq/nq-open-oracle.jsonl.gz"


def example(id: str, question: str, answers: list[str], gold: list[tuple[str, str]] | None = None,
            annotation: dict | None = None) -> dspy.Example:
    """`gold`: the supporting paragraphs as (title, text) pairs, for recall@k. `annotation`
    (multi-hop sets): what the training annotations say, for demos built from them
    (`teleprompt.annotated_demos`): `gold` paragraphs (annotation order; MuSiQue: hop order) with
    their supporting sentences (`facts`), `distractors`, and MuSiQue's `decomposition` into sub-questions."""
    fields: dict[str, Any] = {"id": id, "question": question, "answers": answers}
    if gold is not None:
        fields["gold_titles"] = unique(title for title, _ in gold)
        fields["gold_ids"] = unique(passage_id(title, clean_whitespace(text)) for title, text in gold
                                    if clean_whitespace(text))
    if annotation is not None:
        fields["annotation"] = annotation
    return dspy.Example(**fields).with_inputs("question")


def paragraph(title: str, text: str, facts: list[str] | None = None) -> dict:
    """A paragraph of an annotation: title, cleaned text and (gold ones) its supporting sentences."""
    out = {"title": title, "text": clean_whitespace(text)}
    if facts is not None:
        out["facts"] = [clean_whitespace(f) for f in facts if clean_whitespace(f)]
    return out


def unique(items) -> list[str]:
    return list(dict.fromkeys(items))


# --- reading files: yield (location, raw record) so errors can name file and line ---------

def read_text(path: Path) -> str:
    """A data file's text; bytes that are not UTF-8 are a `DataError` naming file and line."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _read_json_list(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        records = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(records, list):
        raise DataError(f"{path}: expected a JSON list of records, found {type(records).__name__}")
    for i, rec in enumerate(records):
        yield f"record {i}", rec


def _read_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield f"line {lineno}", json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}, line {lineno}: not valid JSON ({exc.msg})") from exc


def _read_tsv(path: Path) -> Iterator[tuple[str, Any]]:
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter="\t")
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a field over csv's 128 KB limit
            raise DataError(f"{path}, line {reader.line_num}: not a readable TSV row ({exc})") from exc
        if row:
            yield f"line {reader.line_num}", row


def _read_records(path: Path) -> Iterator[tuple[str, Any]]:
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    if path.suffix == ".tsv":
        return _read_tsv(path)
    return _read_json_list(path)


def read_split_file(path: Path, layout: str, id_prefix: str, keep: list[str] | None = None) -> list[dspy.Example]:
    """Parse every record of one file (only those whose ids are in `keep`, in its order: an
    official full file read as our subset); a malformed record raises `DataError` naming file and line."""
    parse = LAYOUTS.lookup(layout).parse
    examples = []
    records = _read_records(path) if keep is None else cut_to_ids(_read_records(path), keep, path, DataError)
    for where, raw in records:
        try:
            ex = parse(raw, f"{id_prefix}-{where.split()[-1]}")
        except (KeyError, TypeError, ValueError, SyntaxError, IndexError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise DataError(f"{path}, {where}: malformed {layout} record ({detail})") from exc
        if not isinstance(ex.question, str) or not ex.question.strip():
            raise DataError(f"{path}, {where}: empty question")
        answers = _usable_answers(ex.answers, path, where)
        if not answers:
            log.warning("%s, %s: skipped, no gold answer that survives normalisation (%r)", path, where,
                        ex.answers)
            continue
        ex.answers = answers
        examples.append(ex)
    return examples


def _usable_answers(answers: list, path: Path, where: str) -> list[str]:
    """Gold answers as strings (numbers written out); those that normalise to nothing dropped."""
    usable = []
    for answer in answers:
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str):
            raise DataError(f"{path}, {where}: a gold answer must be a string, got {type(answer).__name__}")
        if normalize_answer(answer):
            usable.append(answer)
        else:
            log.warning("%s, %s: gold answer %r normalises to nothing and is dropped", path, where, answer)
    return usable


# --- hub fallback: the official datasets, converted to the same examples ----------------

def _load_from_hub(hub: HubSource, split: str) -> list[dspy.Example]:
    import datasets  # heavy (pyarrow): only the hub fallback loads it

    rows = datasets.load_dataset(hub.path, hub.config, split=hub.splits[split],
                                 cache_dir=str(get_settings().hf_cache_dir / "datasets"))
    return [hub.convert(row, i) for i, row in enumerate(rows)]


def data_dir() -> Path | None:
    return get_settings().data_dir


def locate(split_file: SplitFile) -> tuple[Path, str] | None:
    """The first of a split's files found in the data folders, with its layout; None if none is."""
    for rel, layout in split_file.candidates():
        path = find_file(rel)
        if path is not None:
            return path, layout
    return None


def missing(what: str, names: list[str], fetch: str | None) -> DataError:
    """The error for files found in no data folder: where they were looked for, and the command
    that fetches them."""
    where = ", ".join(str(root) for root in data_roots())
    hint = f"; `treeqa data get {fetch}` fetches it" if fetch else ""
    return DataError(f"{what}: no {' or '.join(names)} in {where}{hint}")


def split_path(dataset: str, split: str) -> Path:
    """The file a split is read from (see `locate`); raises on an unknown dataset or split, or
    when no data folder holds it."""
    split_file = get_dataset(dataset).split_file(split)
    found = locate(split_file)
    if found is None:
        raise missing(f"{dataset} {split}", [rel for rel, _ in split_file.candidates()], dataset)
    return found[0]


def read_nq_gold_passages(path: Path) -> Iterator[tuple[str, str, str]]:
    """(question, title, text) of every gold passage in the NQ oracle file; a malformed line is
    a `DataError` naming it."""
    try:
        with gzip.open(path, "rb") as fh:
            for lineno, line in enumerate(fh, start=1):
                try:
                    rec = json.loads(line.decode("utf-8"))
                    for ctx in rec["ctxs"]:
                        title, text = ctx["title"], ctx["text"]
                        if not all(isinstance(v, str) for v in (rec["question"], title, text)):
                            raise ValueError("question, title and text must be text")
                        yield rec["question"], title, clean_whitespace(text)
                except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise DataError(f"{path}, line {lineno}: malformed record ({exc})") from exc
    except (OSError, EOFError, zlib.error) as exc:  # not gzip, or cut short: one line, naming the file
        raise DataError(f"{path}: not a whole gzip file ({type(exc).__name__}: {exc}); "
                        "fetch it again (treeqa data get nq)") from None


def load_split(dataset: str, split: str) -> list[dspy.Example]:
    """Every example of a split, in file order (an official full file in place of our subset:
    our subset's records, in our order, `full_files`)."""
    found = get_dataset(dataset)
    split_file = found.split_file(split)
    located = locate(split_file)
    if located is not None:
        path, layout = located
        keep = subset_keep(dataset, split, path, split_file.path)
        examples = read_split_file(path, layout, f"{dataset}-{split}", keep)
        return found.after_read(split, examples) if found.after_read else examples
    hub = found.hub
    if get_settings().allow_hub and hub is not None and split in hub.splits:
        return _load_from_hub(hub, split)
    error = missing(f"{dataset} {split}", [rel for rel, _ in split_file.candidates()], dataset)
    hint = " (or set TREEQA_ALLOW_HUB=1 to read it from the Hugging Face hub)" if hub is not None else ""
    raise DataError(f"{error}{hint}")


def sample(examples: list, n: int | None, seed: int = 0) -> list:
    """A seeded random subset; the first n of a larger sample with the same seed, so runs extend."""
    if n is None or n >= len(examples):
        n = len(examples)
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    return [examples[i] for i in order[:n]]


def load_examples(dataset: str, split: str, n: int | None = None, seed: int = 0,
                  skip: int = 0) -> list[dspy.Example]:
    """`n` examples of `dataset`/`split` (all when n is None), sampled deterministically by seed;
    `skip` leaves out the first ones of that order (a sample already examined while designing)."""
    if skip < 0:
        raise ValueError(f"skip must be non-negative, got {skip}")
    examples = load_split(dataset, split)
    if skip >= len(examples):
        raise ValueError(f"{dataset} {split} has {len(examples)} questions: none left after skipping {skip}")
    return sample(examples, None if n is None else n + skip, seed)[skip:]
