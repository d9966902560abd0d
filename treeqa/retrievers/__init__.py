"""Retrievers over a corpus: dense (faiss + sentence-transformers) and BM25 (bm25s).

A corpus is a benchmark's pooled paragraphs (`get_retriever("hotpotqa")`) or your own JSONL
file, indexed once under a name (`build_corpus_index(file, name)`, `treeqa index build
--corpus FILE --name NAME`) and then searched by that name (`get_retriever(..., corpus=NAME)`,
`--corpus NAME` wherever a dataset's corpus is accepted).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from treeqa.data.corpus import Passage, load_corpus
from treeqa.retrievers.base import IndexMissingError, Retriever
from treeqa.retrievers.bm25 import BM25Retriever
from treeqa.retrievers.dense import DenseRetriever
from treeqa.settings import get_settings

RETRIEVERS: dict[str, type] = {"dense": DenseRetriever, "bm25": BM25Retriever}
_CORPUS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_corpus_name(name: str) -> str:
    if not isinstance(name, str) or not _CORPUS_NAME.fullmatch(name):
        raise ValueError(f"corpus name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    return name


def _registry(name: str) -> Path:
    return get_settings().cache_dir / "corpora" / f"{check_corpus_name(name)}.json"


def build_corpus_index(path: str | Path, name: str, chunk_words: int | None = 100, index_type: str = "auto",
                       batch_size: int = 256, embed_fn=None, ray_address: str | None = None) -> DenseRetriever:
    """Index a JSONL corpus file under `name` (dense, streamed, resumable) and register it;
    with `ray_address` the embedding runs as a Ray Data job on that cluster."""
    path = Path(path).resolve()
    if ray_address is not None and embed_fn is not None:
        raise ValueError("a Ray build embeds with the default encoder; embed_fn cannot be sent along")
    retriever = DenseRetriever.for_file(path, get_settings().index_dir, check_corpus_name(name), chunk_words,
                                        index_type, batch_size, build=True, embed_fn=embed_fn,
                                        ray_address=ray_address)
    entry = {"name": name, "file": str(path), "chunk_words": chunk_words, "index_type": index_type,
             "batch_size": batch_size}
    registry = _registry(name)
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(json.dumps(entry, indent=2))
    return retriever


def corpus_retriever(name: str, build: bool = True) -> DenseRetriever:
    """The registered corpus `name`; a changed or missing index is rebuilt from its file."""
    registry = _registry(name)
    if not registry.is_file():
        raise IndexMissingError(f"no corpus named {name!r}; index one with "
                                f"`treeqa index build --corpus FILE.jsonl --name {name}`")
    entry = json.loads(registry.read_text())
    if not Path(entry["file"]).is_file():
        raise IndexMissingError(f"corpus {name!r}: its file {entry['file']} is gone; index it again")
    return DenseRetriever.for_file(entry["file"], get_settings().index_dir, name, entry["chunk_words"],
                                   entry["index_type"], entry["batch_size"], build=build)


def get_retriever(dataset: str, kind: str = "dense", with_wikipedia: bool = False,
                  build: bool = True, corpus: str | None = None) -> Retriever:
    """The retriever over a dataset's pooled corpus (or the registered `corpus`), loaded from
    the cache dir or built there.

    With `build=False` a missing index raises `IndexMissingError` naming the command to run.
    """
    if kind not in RETRIEVERS:
        raise ValueError(f"unknown retriever {kind!r}; choose one of {', '.join(RETRIEVERS)}")
    if corpus is not None:
        if kind != "dense":
            raise ValueError("your own corpora are indexed densely: use --retriever dense with --corpus")
        return corpus_retriever(corpus, build=build)
    name = f"{dataset}+wiki" if with_wikipedia else dataset
    passages = load_corpus(dataset, with_wikipedia=with_wikipedia)
    return RETRIEVERS[kind].for_corpus(passages, get_settings().index_dir, name, build=build)


__all__ = ["BM25Retriever", "DenseRetriever", "IndexMissingError", "Passage", "RETRIEVERS", "Retriever",
           "build_corpus_index", "check_corpus_name", "corpus_retriever", "get_retriever"]
