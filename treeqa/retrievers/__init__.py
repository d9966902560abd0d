"""Retrievers over a corpus: dense (faiss + sentence-transformers) and BM25 (bm25s)."""

from __future__ import annotations

from treeqa.data.corpus import Passage, load_corpus
from treeqa.retrievers.base import IndexMissingError, Retriever
from treeqa.retrievers.bm25 import BM25Retriever
from treeqa.retrievers.dense import DenseRetriever
from treeqa.settings import get_settings

RETRIEVERS: dict[str, type] = {"dense": DenseRetriever, "bm25": BM25Retriever}


def get_retriever(dataset: str, kind: str = "dense", with_wikipedia: bool = False,
                  build: bool = True) -> Retriever:
    """The retriever over a dataset's pooled corpus, loaded from the cache dir or built there.

    With `build=False` a missing index raises `IndexMissingError` naming the command to run.
    """
    if kind not in RETRIEVERS:
        raise ValueError(f"unknown retriever {kind!r}; choose one of {', '.join(RETRIEVERS)}")
    name = f"{dataset}+wiki" if with_wikipedia else dataset
    corpus = load_corpus(dataset, with_wikipedia=with_wikipedia)
    return RETRIEVERS[kind].for_corpus(corpus, get_settings().index_dir, name, build=build)


__all__ = ["BM25Retriever", "DenseRetriever", "IndexMissingError", "Passage", "RETRIEVERS", "Retriever",
           "get_retriever"]
