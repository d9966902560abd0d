"""Benchmark questions as `dspy.Example`s, read from the official file layouts.

Every example has `id`, `question`, `answers` (all gold strings) and, for the multi-hop
sets and the NQ test questions whose gold passage is in the corpus, `gold_ids` (corpus ids of
the supporting paragraphs, what recall@k counts) and `gold_titles` (their titles); `question`
is the only input. A gold answer that normalises
to nothing (e.g. "The") could only ever match an empty prediction, so it is dropped with a
warning, and a record left without any gold answer is skipped with a warning naming file
and record.
Files are read from the data dir (`TREEQA_DATA_DIR`, else `../shared/data`); with
`TREEQA_ALLOW_HUB=1` a dataset that is not local comes from the Hugging Face hub.
"""

from __future__ import annotations

import ast
import csv
import gzip
import io
import json
import logging
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dspy

from treeqa.data.answers import normalize_answer
from treeqa.data.full_files import cut_to_ids, split_source
from treeqa.data.passage import clean_whitespace, passage_id
from treeqa.registry import Registry
from treeqa.settings import get_settings

log = logging.getLogger(__name__)


class DataError(ValueError):
    """A data file is missing or a record in it is malformed."""


@dataclass(frozen=True)
class SplitFile:
    path: str  # relative to the data dir
    layout: str  # key of _PARSERS


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
    after_read: Callable[[str, list[dspy.Example], Path], list[dspy.Example]] | None = None

    def __post_init__(self):
        object.__setattr__(self, "splits", MappingProxyType(dict(self.splits)))  # read-only
        if self.eval_split not in self.splits:
            raise ValueError(f"{self.name}: its evaluation split {self.eval_split!r} is not one of its splits")

    def split_file(self, split: str) -> SplitFile:
        """The file of `split`; an unknown split is a `DataError` naming the dataset's splits."""
        if split not in self.splits:
            raise DataError(f"{self.name} has no split {split!r}; available: {', '.join(self.splits)}")
        return self.splits[split]


# name -> Dataset, in the order registered (below, after the parsers)
REGISTRY: Registry[Dataset] = Registry("dataset", error=DataError)


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


def _example(id: str, question: str, answers: list[str], gold: list[tuple[str, str]] | None = None,
             annotation: dict | None = None) -> dspy.Example:
    """`gold`: the supporting paragraphs as (title, text) pairs, for recall@k. `annotation`
    (multi-hop sets): what the training annotations say, for demos built from them
    (`teleprompt.annotated_demos`): `gold` paragraphs (annotation order; MuSiQue: hop order) with
    their supporting sentences (`facts`), `distractors`, and MuSiQue's `decomposition` into sub-questions."""
    fields: dict[str, Any] = {"id": id, "question": question, "answers": answers}
    if gold is not None:
        fields["gold_titles"] = _unique(title for title, _ in gold)
        fields["gold_ids"] = _unique(passage_id(title, clean_whitespace(text)) for title, text in gold
                                     if clean_whitespace(text))
    if annotation is not None:
        fields["annotation"] = annotation
    return dspy.Example(**fields).with_inputs("question")


def _paragraph(title: str, text: str, facts: list[str] | None = None) -> dict:
    out = {"title": title, "text": clean_whitespace(text)}
    if facts is not None:
        out["facts"] = [clean_whitespace(f) for f in facts if clean_whitespace(f)]
    return out


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


# --- one parser per official layout: (record, where) -> Example -------------------------

def _parse_hotpot(rec: dict, where: str) -> dspy.Example:
    """HotpotQA and 2WikiMultihopQA: `_id, question, answer, supporting_facts [[title, sent]],
    context [[title, [sentences]]]`; the gold paragraphs are the context paragraphs that
    hold a supporting fact."""
    facts = [(fact[0], fact[1]) for fact in rec.get("supporting_facts") or []]
    titles = _unique(title for title, _ in facts)
    sentences = {title: list(sents) for title, sents in rec.get("context") or []}
    context = {title: " ".join(sents) for title, sents in sentences.items()}
    gold = [(title, context.get(title, "")) for title in titles]  # a title missing from the context: no id

    def facts_of(title: str) -> list[str]:
        sents = sentences.get(title, [])
        return [sents[i] for t, i in facts if t == title and isinstance(i, int) and 0 <= i < len(sents)]

    annotation = {"type": rec.get("type"),
                  "gold": [_paragraph(t, context[t], facts_of(t)) for t in titles if context.get(t)],
                  "distractors": [_paragraph(t, text) for t, text in context.items() if t not in titles],
                  "decomposition": []}
    return _example(str(rec["_id"]), rec["question"], [rec["answer"]], gold, annotation)


def _parse_musique(rec: dict, where: str) -> dspy.Example:
    answers = _unique([rec["answer"], *(rec.get("answer_aliases") or [])])
    gold = [(p["title"], p["paragraph_text"]) for p in rec["paragraphs"] if p.get("is_supporting")]
    steps = [s for s in rec.get("question_decomposition") or [] if isinstance(s, dict)]
    # MuSiQue orders supporting paragraphs by their hop through the decomposition's paragraph_support_idx
    by_idx = {p.get("idx"): p for p in rec["paragraphs"]}
    hops = [by_idx[s["paragraph_support_idx"]] for s in steps if s.get("paragraph_support_idx") in by_idx]
    ordered = hops or [p for p in rec["paragraphs"] if p.get("is_supporting")]
    annotation = {"type": f"{len(steps)}hop" if steps else None,
                  "gold": [_paragraph(p["title"], p["paragraph_text"], [p["paragraph_text"]]) for p in ordered],
                  "distractors": [_paragraph(p["title"], p["paragraph_text"]) for p in rec["paragraphs"]
                                  if not p.get("is_supporting")],
                  "decomposition": [{"question": s.get("question", ""), "answer": s.get("answer", "")} for s in steps]}
    return _example(str(rec["id"]), rec["question"], answers, gold, annotation)


def _parse_qa_jsonl(rec: dict, where: str) -> dspy.Example:
    """NQ-open and WebQuestions test: `{question, answer: [..]}`."""
    answers = rec["answer"]
    return _example(where, rec["question"], [answers] if isinstance(answers, str) else list(answers))


def _parse_webq_json(rec: dict, where: str) -> dspy.Example:
    return _example(str(rec["qId"]), rec["qText"], list(rec["answers"]))


def _parse_dpr_row(row: list[str], where: str) -> dspy.Example:
    """DPR qa.csv: `question<TAB>python-list-of-answers`."""
    if len(row) != 2:
        raise ValueError(f"expected 2 tab-separated columns, found {len(row)}")
    answers = ast.literal_eval(row[1])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError("the answer column is not a list of strings")
    return _example(where, row[0], answers)


_PARSERS: dict[str, Callable[[Any, str], dspy.Example]] = {
    "hotpot": _parse_hotpot,
    "musique": _parse_musique,
    "qa_jsonl": _parse_qa_jsonl,
    "webq_json": _parse_webq_json,
    "dpr_tsv": _parse_dpr_row,
}


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
    parse = _PARSERS[layout]
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

def _hub_hotpot(row: dict, i: int) -> dspy.Example:
    pairs = zip(row["context"]["title"], row["context"]["sentences"], strict=True)
    context = {title: " ".join(sentences) for title, sentences in pairs}
    gold = [(title, context.get(title, "")) for title in _unique(row["supporting_facts"]["title"])]
    return _example(row["id"], row["question"], [row["answer"]], gold)


def _hub_nq(row: dict, i: int) -> dspy.Example:
    return _example(f"nq-{i}", row["question"], list(row["answer"]))


def _hub_trivia(row: dict, i: int) -> dspy.Example:
    answer = row["answer"]
    return _example(row["question_id"], row["question"], _unique([answer["value"], *answer["aliases"]]))


def _hub_webq(row: dict, i: int) -> dspy.Example:
    return _example(f"webq-{i}", row["question"], list(row["answers"]))


def _load_from_hub(hub: HubSource, split: str) -> list[dspy.Example]:
    import datasets

    rows = datasets.load_dataset(hub.path, hub.config, split=hub.splits[split],
                                 cache_dir=str(get_settings().hf_cache_dir / "datasets"))
    return [hub.convert(row, i) for i, row in enumerate(rows)]


def data_dir() -> Path | None:
    return get_settings().data_dir


def split_path(dataset: str, split: str) -> Path:
    """Where a split's file is expected; raises on an unknown dataset or split."""
    split_file = get_dataset(dataset).split_file(split)
    root = data_dir()
    if root is None:
        raise DataError("no data dir: set TREEQA_DATA_DIR to a folder laid out like ../shared/data")
    return root / split_file.path


def read_nq_gold_passages(path: Path) -> Iterator[tuple[str, str, str]]:
    """(question, title, text) of every gold passage in the NQ oracle file; a malformed line is
    a `DataError` naming it."""
    with gzip.open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                rec = json.loads(line.decode("utf-8"))
                for ctx in rec["ctxs"]:
                    title, text = ctx["title"], ctx["text"]
                    if not (isinstance(rec["question"], str) and isinstance(title, str) and isinstance(text, str)):
                        raise ValueError("question, title and text must be text")
                    yield rec["question"], title, clean_whitespace(text)
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise DataError(f"{path}, line {lineno}: malformed record ({exc})") from exc


def _with_nq_gold(examples: list[dspy.Example], root: Path) -> list[dspy.Example]:
    """NQ test questions get their gold passage (in the open-domain corpus) as `gold_ids`, so
    recall@k is measured where the corpus can answer; the others keep none. Without the oracle
    file (a data dir of questions only) nothing is added."""
    path = root / NQ_GOLD_PASSAGES
    if not path.is_file():
        log.warning("%s not found: NQ test questions get no gold passages (no recall@k)", path)
        return examples
    gold: dict[str, list[tuple[str, str]]] = {}
    for question, title, text in read_nq_gold_passages(path):
        gold.setdefault(question, []).append((title, text))
    return [_example(ex.id, ex.question, ex.answers, gold[ex.question]) if ex.question in gold else ex
            for ex in examples]


def _nq_test_gold(split: str, examples: list[dspy.Example], root: Path) -> list[dspy.Example]:
    return _with_nq_gold(examples, root) if split == "test" else examples


def load_split(dataset: str, split: str) -> list[dspy.Example]:
    """Every example of a split, in file order (an official full file in place of our subset:
    our subset's records, in our order, `full_files`)."""
    path, keep = split_source(dataset, split, split_path(dataset, split), data_dir())
    found = get_dataset(dataset)
    if path.is_file():
        examples = read_split_file(path, found.splits[split].layout, f"{dataset}-{split}", keep)
        return found.after_read(split, examples, data_dir()) if found.after_read else examples
    hub = found.hub
    if get_settings().allow_hub and hub is not None and split in hub.splits:
        return _load_from_hub(hub, split)
    hint = " or set TREEQA_ALLOW_HUB=1 to fetch it" if hub is not None else ""
    raise DataError(f"{dataset} {split}: expected the file {path}; put it there{hint}")


# --- the benchmarks, each registered with its files, evaluation split and hub source ------------
# (the evaluation split is the one the papers report: for the open-domain sets "test", NQ's being
# the 3,610 NQ-open questions, whose gold passages are in the corpus; NQ's DPR dev questions have
# none of theirs there)

register(Dataset("hotpotqa", {"train": SplitFile("hotpotqa/hotpot_train_subset.json", "hotpot"),
                              "dev": SplitFile("hotpotqa/hotpot_dev_distractor_subset.json", "hotpot")},
                 eval_split="dev",
                 hub=HubSource("hotpotqa/hotpot_qa", "distractor", {"train": "train", "dev": "validation"},
                               _hub_hotpot)))
register(Dataset("2wikimultihopqa", {"train": SplitFile("2wikimultihopqa/train_subset.json", "hotpot"),
                                     "dev": SplitFile("2wikimultihopqa/dev_subset.json", "hotpot")},
                 eval_split="dev"))
register(Dataset("musique", {"train": SplitFile("musique/musique_ans_train_subset.jsonl", "musique"),
                             "dev": SplitFile("musique/musique_ans_dev_subset.jsonl", "musique")},
                 eval_split="dev"))
register(Dataset("nq", {"dev": SplitFile("nq/nq-dev.qa.tsv", "dpr_tsv"),
                        "test": SplitFile("nq/NQ-open.test.jsonl", "qa_jsonl")},
                 eval_split="test",
                 hub=HubSource("google-research-datasets/nq_open", None, {"test": "validation"}, _hub_nq),
                 after_read=_nq_test_gold))
register(Dataset("triviaqa", {"dev": SplitFile("triviaqa/trivia-dev.qa.tsv", "dpr_tsv"),
                              "test": SplitFile("triviaqa/trivia-test.qa.tsv", "dpr_tsv")},
                 eval_split="test",
                 hub=HubSource("mandarjoshi/trivia_qa", "rc.nocontext", {"dev": "validation", "test": "validation"},
                               _hub_trivia)))
register(Dataset("webq", {"train": SplitFile("webq/webq-train.json", "webq_json"),
                          "test": SplitFile("webq/webq-test.jsonl", "qa_jsonl")},
                 eval_split="test",
                 hub=HubSource("stanfordnlp/web_questions", None, {"train": "train", "test": "test"}, _hub_webq)))


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
