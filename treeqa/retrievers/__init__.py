"""Retrievers over a corpus: dense (faiss + sentence-transformers) and BM25 (bm25s).

A corpus is a benchmark's pooled paragraphs (`get_retriever("hotpotqa")`) or your own JSONL
file, indexed once under a name (`build_corpus_index(file, name)`, `treeqa index build
--corpus-file FILE --name NAME`) and then searched by that name (`get_retriever(..., corpus=NAME)`,
`--corpus NAME` wherever a dataset's corpus is accepted).

A retriever kind is one module that registers its class in `RETRIEVERS`; `discover` (the
registries' one rule) imports every module of this package and those TREEQA_RETRIEVERS names.
"""

from __future__ import annotations

import re
from pathlib import Path

from treeqa.data import DataError
from treeqa.data.corpus import Passage, load_corpus
from treeqa.registry import discover as _discover
from treeqa.retrievers.base import IndexMissingError, Retriever
from treeqa.retrievers.bm25 import BM25Retriever  # each kind's module registers it in RETRIEVERS
from treeqa.retrievers.corpora import read_entry, update_entry
from treeqa.retrievers.dense import DenseRetriever
from treeqa.retrievers.indexed import DEFAULT_KIND, RETRIEVERS
from treeqa.settings import get_settings


def discover() -> None:
    """Register every retriever kind of this package and of the modules TREEQA_RETRIEVERS names."""
    _discover("retrievers", __name__)


discover()

_CORPUS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_corpus_name(name: str) -> str:
    if not isinstance(name, str) or not _CORPUS_NAME.fullmatch(name):
        raise ValueError(f"corpus name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    return name


def _registry(name: str) -> Path:
    return get_settings().cache_dir / "corpora" / f"{check_corpus_name(name)}.json"


def build_corpus_index(path: str | Path, name: str, chunk_words: int | None = 100, index_type: str = "auto",
                       batch_size: int = 256, embed_fn=None, ray_address: str | None = None,
                       kind: str = DEFAULT_KIND) -> Retriever:
    """Index a JSONL corpus file under `name` (streamed, resumable) and register it: densely,
    with `ray_address` embedding as a Ray Data job on that cluster, or with BM25 (`kind`)."""
    path = Path(path).resolve()
    check_corpus_name(name)
    if not path.is_file():
        raise DataError(f"{path}: {'a folder, not' if path.is_dir() else 'no such'} corpus file")
    retriever, kept = RETRIEVERS.lookup(kind).index_file(  # an unknown kind: an error naming the kinds
        path, get_settings().index_dir, name, chunk_words, index_type=index_type, batch_size=batch_size,
        embed_fn=embed_fn, ray_address=ray_address)

    def register(entry: dict) -> dict:
        if entry.get("file") != str(path) or entry.get("chunk_words") != chunk_words:
            entry = {}  # another file under this name: what was built for the old one no longer counts
        return entry | {"name": name, "file": str(path), "chunk_words": chunk_words, **kept}

    update_entry(_registry(name), name, register)  # locked and atomic: builds of one name may run at once
    return retriever


def registered_corpus(name: str) -> dict:
    """The registry entry of corpus `name`; a clear error when none is registered or its file is
    gone (checked before a long run, not when its first searching program starts)."""
    registry = _registry(name)
    if not registry.is_file():
        raise IndexMissingError(f"no corpus named {name!r}; index one with "
                                f"`treeqa index build --corpus-file FILE.jsonl --name {name}`")
    entry = read_entry(registry, name)  # a torn file: an error naming it
    if not Path(entry["file"]).is_file():
        raise IndexMissingError(f"corpus {name!r}: its file {entry['file']} is gone; index it again")
    return entry


def corpus_retriever(name: str, build: bool = True, kind: str = DEFAULT_KIND) -> Retriever:
    """The registered corpus `name`, searched densely or with BM25; a changed or missing index
    is (re)built from its file."""
    retriever = RETRIEVERS.lookup(kind)
    return retriever.for_entry(registered_corpus(name), get_settings().index_dir, name, build=build)


def get_retriever(dataset: str, kind: str = DEFAULT_KIND, with_wikipedia: bool = False,
                  build: bool = True, corpus: str | None = None) -> Retriever:
    """The retriever over a dataset's pooled corpus (or the registered `corpus`), loaded from
    the cache dir or built there.

    With `build=False` a missing index raises `IndexMissingError` naming the command to run.
    """
    retriever = RETRIEVERS.lookup(kind)  # an unknown kind: an error naming the kinds
    if corpus is not None:
        return corpus_retriever(corpus, build=build, kind=kind)
    name = f"{dataset}+wiki" if with_wikipedia else dataset
    passages = load_corpus(dataset, with_wikipedia=with_wikipedia)
    return retriever.for_corpus(passages, get_settings().index_dir, name, build=build)


__all__ = ["BM25Retriever", "DEFAULT_KIND", "DenseRetriever", "IndexMissingError", "Passage", "RETRIEVERS",
           "Retriever", "build_corpus_index", "check_corpus_name", "corpus_retriever", "discover", "get_retriever"]
