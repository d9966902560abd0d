"""Retrieval corpora: real Wikipedia paragraphs pooled from the benchmark files.

Multi-hop sets follow the standard offline setting: every paragraph of every record
(dev and train) pooled and deduplicated by (title, text), so a question's gold
paragraphs sit among thousands of real distractors. The open-domain sets (nq, triviaqa,
webq) search the Wikipedia lead sections plus the NQ gold passages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from treeqa.data.folders import find_file
from treeqa.data.full_files import cut_to_ids, subset_keep
from treeqa.data.loaders import (
    LAYOUTS,
    NQ_GOLD_PASSAGES,
    SPLITS,
    DataError,
    _read_records,
    get_dataset,
    locate,
    missing,
    read_nq_gold_passages,
    read_text,
)
from treeqa.data.passage import Passage, passage_id
from treeqa.data.passage import clean_whitespace as _clean

__all__ = ["Passage", "corpus_description", "load_corpus", "passage_id"]

WIKIPEDIA_LEADS = "wikipedia/vital_articles_en.json"


def text_of(value, what: str) -> str:
    """`value` if it is text; else a ValueError naming `what` (a layout's paragraphs check with it)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text, got {type(value).__name__}")
    return value


def _dataset_paragraphs(dataset: str) -> Iterator[tuple[str, str]]:
    for split in sorted(SPLITS[dataset]):
        spec = SPLITS[dataset][split]
        located = locate(spec)
        if located is None:
            raise missing(f"{dataset} corpus", [rel for rel, _ in spec.candidates()], dataset)
        path, layout = located
        paragraphs = LAYOUTS.lookup(layout).paragraphs
        if paragraphs is None:
            raise DataError(f"{dataset}: its {layout} files hold no paragraphs to pool into a corpus")
        keep = subset_keep(dataset, split, path, spec.path)  # a full file: our subset's records
        records = _read_records(path) if keep is None else cut_to_ids(_read_records(path), keep, path, DataError)
        for where, record in records:
            try:
                yield from paragraphs(record)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise DataError(f"{path}, {where}: malformed paragraphs ({exc})") from exc


def _wikipedia_leads() -> Iterator[tuple[str, str]]:
    path = find_file(WIKIPEDIA_LEADS)
    if path is None:
        raise missing("Wikipedia leads", [WIKIPEDIA_LEADS], "wikipedia")
    try:
        articles = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(articles, dict):
        raise DataError(f"{path}: expected an object of articles keyed by title, found {type(articles).__name__}")
    for key, article in articles.items():
        if not isinstance(article, dict):
            raise DataError(f"{path}, article {key!r}: expected an object, found {type(article).__name__}")
        extract, title = article.get("extract"), article.get("title", key)
        if extract and not (isinstance(extract, str) and isinstance(title, str)):
            raise DataError(f"{path}, article {key!r}: title and extract must be text")
        if extract:
            yield title, _clean(extract)


def _nq_gold_passages() -> Iterator[tuple[str, str]]:
    path = find_file(NQ_GOLD_PASSAGES)
    if path is None:
        raise missing("NQ gold passages", [NQ_GOLD_PASSAGES], "nq")
    for _, title, text in read_nq_gold_passages(path):
        yield title, text


def dedupe(pairs: Iterable[tuple[str, str]]) -> list[Passage]:
    """Passages in first-seen order, one per distinct (title, text); empty texts dropped."""
    seen: dict[str, Passage] = {}
    for title, text in pairs:
        if not text:
            continue
        pid = passage_id(title, text)
        if pid not in seen:
            seen[pid] = Passage(pid, title, text)
    return list(seen.values())


def corpus_description(dataset: str, with_wikipedia: bool = False) -> str:
    """What `load_corpus(dataset, with_wikipedia)` searches, in words, for run summaries."""
    if get_dataset(dataset).corpus == "open":
        return f"Wikipedia leads ({WIKIPEDIA_LEADS}) + NQ-open test gold passages ({NQ_GOLD_PASSAGES})"
    files = ", ".join(spec.path for _, spec in sorted(SPLITS[dataset].items()))
    extra = f" + Wikipedia leads ({WIKIPEDIA_LEADS})" if with_wikipedia else ""
    return f"every paragraph of {files}, deduplicated{extra}"


def load_corpus(dataset: str, with_wikipedia: bool = False) -> list[Passage]:
    """The pooled, deduplicated retrieval corpus of a dataset.

    Args:
        dataset: a name from `treeqa.data.DATASETS`.
        with_wikipedia: add the Wikipedia lead sections as further distractors
            (always included for the open-domain sets).
    """
    found = get_dataset(dataset)  # an unknown name: a DataError naming every dataset

    def pairs() -> Iterator[tuple[str, str]]:
        if found.corpus == "open":
            yield from _wikipedia_leads()
            yield from _nq_gold_passages()
            return
        yield from _dataset_paragraphs(dataset)
        if with_wikipedia:
            yield from _wikipedia_leads()

    corpus = dedupe(pairs())
    if not corpus:
        raise DataError(f"the {dataset} corpus is empty")
    return corpus
