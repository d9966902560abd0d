"""Sparse retrieval with bm25s (Lucene-style BM25, English stopwords removed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from treeqa.data.corpus import Passage
from treeqa.retrievers import store
from treeqa.retrievers.indexed import RETRIEVERS, IndexedRetriever

MODEL, BM25_DIR, document_text = store.BM25_MODEL, store.BM25_DIR, store.bm25_text


def _tokens(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


class BM25Retriever(IndexedRetriever):
    """BM25 over `passages`; `model` is a fitted `bm25s.BM25` whose document i is `passages[i]`."""

    kind = "bm25"
    index_label = "BM25"
    build_command = "treeqa index build --retriever bm25"

    def __init__(self, passages: list[Passage], model):
        if not passages:
            raise ValueError("cannot search an empty corpus")
        self.passages = passages
        self.model = model

    @classmethod
    def build(cls, passages: list[Passage], progress: bool = True) -> BM25Retriever:
        import bm25s

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
        import bm25s

        streamed = isinstance(passages, store.PassageStore)  # a corpus of any size: its scores stay on disk
        model = bm25s.BM25.load(str(folder / BM25_DIR), mmap=streamed, show_progress=False)
        if model.scores["num_docs"] != len(passages):
            raise store.IndexCorruptError(f"{folder}: BM25 scores for {model.scores['num_docs']} passages, "
                                          f"{len(passages)} passages")
        return cls(passages, model)

    @classmethod
    def for_file(cls, path: str | Path, index_root: Path, name: str, chunk_words: int | None = 100,
                 build: bool = True, batch_size: int = 10_000) -> BM25Retriever:
        """The BM25 index of a JSONL corpus file (see `treeqa.data.jsonl_corpus`), built as a
        stream (`treeqa.retrievers.streaming.build_bm25`) when missing or corrupt."""
        from treeqa.data.jsonl_corpus import file_fingerprint, read_jsonl_corpus
        from treeqa.retrievers import streaming

        fingerprint = store.fingerprint([], f"{MODEL}|{file_fingerprint(path, chunk_words)}")
        folder = Path(index_root) / f"{name}-corpus-bm25-{fingerprint}"

        def build_and_save() -> BM25Retriever:
            meta = {"name": name, "source": str(Path(path).resolve()), "chunk_words": chunk_words}
            streaming.build_bm25(read_jsonl_corpus(path, chunk_words), folder, meta, batch_size=batch_size)
            return cls.load(folder)

        return store.load_or_build(folder, cls.load, build_and_save if build else None,
                                   f"treeqa index build --corpus-file {path} --name {name} --retriever bm25")

    @classmethod
    def for_corpus(cls, passages: list[Passage], index_root: Path, name: str,
                   build: bool = True) -> BM25Retriever:
        folder = store.corpus_folder(index_root, name, f"bm25-{store.fingerprint(passages, MODEL)}")

        def build_and_save() -> BM25Retriever:
            retriever = cls.build(passages)
            retriever.save(folder, {"name": name})
            return retriever

        return store.load_or_build(folder, cls.load, build_and_save if build else None,
                                   f"treeqa index build --dataset {name} --retriever bm25")

    @classmethod
    def index_file(cls, path: Path, index_root: Path, name: str, chunk_words: int | None,
                   index_type: str = "auto", batch_size: int = 256, embed_fn=None,
                   ray_address: str | None = None) -> tuple[BM25Retriever, dict[str, Any]]:
        if ray_address is not None or embed_fn is not None or index_type != "auto":
            raise ValueError("a BM25 index embeds nothing: --ray and --index are for dense indexes")
        return cls.for_file(path, index_root, name, chunk_words), {}

    @classmethod
    def for_entry(cls, entry: dict[str, Any], index_root: Path, name: str, build: bool = True) -> BM25Retriever:
        return cls.for_file(entry["file"], index_root, name, entry["chunk_words"], build=build)

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
