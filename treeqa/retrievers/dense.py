"""Dense retrieval: all-MiniLM-L6-v2 embeddings in a faiss inner-product index.

Embeddings are L2-normalised, so inner product is cosine similarity. The pooled benchmark
corpora are embedded in memory (below `IVF_THRESHOLD` passages an exact flat index, above
an IVF one); your own JSONL corpora are built as a resumable stream of any size
(`for_file`, `treeqa.retrievers.streaming`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from treeqa.data.corpus import Passage
from treeqa.retrievers import store, streaming
from treeqa.retrievers.encoder import MODEL_PACKAGE, embed, load_encoder, model_name  # noqa: F401 - the encoder's names
from treeqa.retrievers.indexed import RETRIEVERS, IndexedRetriever
from treeqa.settings import get_settings

INDEX_FILE = store.INDEX_FILE
IVF_THRESHOLD = 100_000
def build_faiss_index(vectors: np.ndarray):
    import faiss  # heavy: loaded when an index is built or read, not by every command

    n, dim = vectors.shape
    if n < IVF_THRESHOLD:
        index = faiss.IndexFlatIP(dim)
    else:
        nlist = int(4 * math.sqrt(n))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = 16
    index.add(vectors)
    return index


class DenseRetriever(IndexedRetriever):
    """Cosine-similarity search over a corpus.

    Args:
        passages: the corpus, in index order.
        index: a faiss index whose row i embeds `passages[i]`.
    """

    kind = "dense"
    index_label = "dense"
    file_options = {"index_type": "auto", "batch_size": 256, "embed_fn": None, "ray_address": None}
    fingerprint_options = ("index_type",)
    kept_options = ("index_type", "batch_size")

    def __init__(self, passages: list[Passage], index):
        if not passages:
            raise ValueError("cannot search an empty corpus")
        if index.ntotal != len(passages):
            raise ValueError(f"index holds {index.ntotal} vectors for {len(passages)} passages")
        self.passages = passages
        self.index = index

    @classmethod
    def build(cls, passages: list[Passage], progress: bool = True) -> DenseRetriever:
        """Embed every passage and index it in memory."""
        if not passages:
            raise ValueError("cannot index an empty corpus")
        vectors = embed([p.as_text() for p in passages], progress=progress)
        return cls(passages, build_faiss_index(vectors))

    @classmethod
    def model_id(cls) -> str:
        return model_name()

    def _write_index(self, folder: Path) -> None:
        import faiss  # heavy: loaded when an index is built or read, not by every command

        faiss.write_index(self.index, str(folder / INDEX_FILE))

    @classmethod
    def _from_folder(cls, folder: Path, passages: list[Passage]) -> DenseRetriever:
        import faiss  # heavy: loaded when an index is built or read, not by every command

        try:
            index = faiss.read_index(str(folder / INDEX_FILE))
        except RuntimeError as exc:  # faiss says why in a C++ traceback: keep its first line
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "unreadable"
            raise store.IndexCorruptError(f"{folder / INDEX_FILE}: not a faiss index ({reason[:200]})") from None
        if index.ntotal != len(passages):
            raise store.IndexCorruptError(f"{folder}: {index.ntotal} vectors for {len(passages)} passages")
        retriever = cls(passages, index)
        settings = get_settings()
        retriever.set_search(nprobe=settings.nprobe, ef_search=settings.ef_search)
        load_encoder()  # ready to search: the first question should not pay for the encoder's start-up
        return retriever

    def set_search(self, nprobe: int | None = None, ef_search: int | None = None) -> None:
        """Query-time knobs of approximate indexes: IVF lists probed, HNSW candidates kept
        (more: better recall, slower). Ignored by an exact index."""
        import faiss  # heavy: loaded when an index is built or read, not by every command

        space = faiss.ParameterSpace()
        for name, value in (("nprobe", nprobe), ("efSearch", ef_search)):
            if value is None:
                continue
            try:
                space.set_index_parameter(self.index, name, int(value))
            except RuntimeError:  # the index has no such parameter (Flat, or IVF for efSearch)
                pass

    @classmethod
    def _build_stream(cls, passages: Iterable[Passage], folder: Path, meta: dict, *, index_type: str,
                      batch_size: int, embed_fn, ray_address: str | None) -> None:
        streaming.build(passages, folder, meta, embed_fn or embed, index_type=index_type, batch_size=batch_size,
                        ray_address=ray_address)

    @classmethod
    def _file_options(cls, index_type: str, batch_size: int, embed_fn, ray_address: str | None) -> dict[str, Any]:
        if ray_address is not None and embed_fn is not None:
            raise ValueError("a Ray build embeds with the default encoder; embed_fn cannot be sent along")
        return {"index_type": index_type, "batch_size": batch_size, "embed_fn": embed_fn, "ray_address": ray_address}

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        self._check(queries, k)
        scores, rows = self.index.search(embed(queries), min(k, len(self.passages)))
        return [
            [Passage(self.passages[r].id, self.passages[r].title, self.passages[r].text, float(s))
             for s, r in zip(score_row, row, strict=True) if r >= 0]
            for score_row, row in zip(scores, rows, strict=True)
        ]


RETRIEVERS.register(DenseRetriever.kind, DenseRetriever)
