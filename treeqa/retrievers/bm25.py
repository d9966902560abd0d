"""Sparse retrieval with bm25s (Lucene-style BM25, English stopwords removed)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from treeqa.data.corpus import Passage
from treeqa.retrievers import store, streaming
from treeqa.retrievers.indexed import RETRIEVERS, IndexedRetriever

MODEL, BM25_DIR, document_text = store.BM25_MODEL, store.BM25_DIR, store.bm25_text


def _tokens(texts: list[str]) -> list[list[str]]:
    import bm25s  # loaded where BM25 is used, not by every command

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


class BM25Retriever(IndexedRetriever):
    """BM25 over `passages`; `model` is a fitted `bm25s.BM25` whose document i is `passages[i]`."""

    kind = "bm25"
    index_label = "BM25"
    file_options = {"batch_size": 10_000}  # passages tokenized per batch

    def __init__(self, passages: list[Passage], model):
        if not passages:
            raise ValueError("cannot search an empty corpus")
        self.passages = passages
        self.model = model

    @classmethod
    def build(cls, passages: list[Passage], progress: bool = True) -> BM25Retriever:
        import bm25s  # loaded where BM25 is used, not by every command

        if not passages:
            raise ValueError("cannot index an empty corpus")
        model = bm25s.BM25()
        model.index(_tokens([document_text(p) for p in passages]), show_progress=progress)
        return cls(passages, model)

    @classmethod
    def model_id(cls) -> str:
        return MODEL

    def _write_index(self, folder: Path) -> None:
        self.model.save(str(folder / BM25_DIR))

    @classmethod
    def _from_folder(cls, folder: Path, passages: list[Passage]) -> BM25Retriever:
        import bm25s  # loaded where BM25 is used, not by every command

        streamed = isinstance(passages, store.PassageStore)  # a corpus of any size: its scores stay on disk
        model = bm25s.BM25.load(str(folder / BM25_DIR), mmap=streamed, show_progress=False)
        if model.scores["num_docs"] != len(passages):
            raise store.IndexCorruptError(f"{folder}: BM25 scores for {model.scores['num_docs']} passages, "
                                          f"{len(passages)} passages")
        return cls(passages, model)

    @classmethod
    def _build_stream(cls, passages: Iterable[Passage], folder: Path, meta: dict, *, batch_size: int) -> None:
        streaming.build_bm25(passages, folder, meta, batch_size=batch_size)

    @classmethod
    def _file_options(cls, index_type: str, batch_size: int, embed_fn, ray_address: str | None) -> dict[str, Any]:
        if ray_address is not None or embed_fn is not None or index_type != "auto":
            raise ValueError("a BM25 index embeds nothing: --ray and --index are for dense indexes")
        return {}  # batch_size counts passages embedded: BM25 tokenizes in its own batches

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        self._check(queries, k)
        k = min(k, len(self.passages))
        results: list[list[Passage]] = []
        for tokens in _tokens(queries):
            if not tokens:  # only stopwords: BM25 has nothing to match
                results.append([])
                continue
            docs, scores = self.model.retrieve([tokens], k=k, show_progress=False)
            results.append([
                Passage(self.passages[d].id, self.passages[d].title, self.passages[d].text, float(s))
                for d, s in zip(np.asarray(docs[0]).tolist(), np.asarray(scores[0]).tolist(), strict=True) if s > 0
            ])
        return results


RETRIEVERS.register(BM25Retriever.kind, BM25Retriever)
