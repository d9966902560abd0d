"""Dense indexes of any size, built as a stream that survives being killed.

1. The passages are written to `passages.jsonl` as they are read (with each line's offset),
   never held in memory.
2. They are embedded in batches straight into an on-disk array (`vectors.npy`, memory-mapped);
   after each batch the count of finished rows is saved, so a build killed at any point
   resumes from the last finished batch. Peak RAM is one batch, not the corpus.
3. The faiss index is chosen by size through `index_factory` (or given): exact (`Flat`) below
   100k passages, `IVF<n>,Flat` below 2M, `IVF<n>,SQ8` (8-bit scalar codes, 384 bytes a vector:
   recall@10 0.98 on 1M vectors, where `PQ48`'s 48 bytes gave 0.33; `benchmarks/index_scale.md`) above; trained on
   a sample, filled from the array in chunks. `HNSW32` is another choice for millions.
4. The folder gets its manifest and is published; the array is deleted (the index holds the
   vectors, or their codes).

Everything happens in `.building-<folder>` beside the final folder, under the build lock.

A BM25 index (`build_bm25`) streams the same way: step 1 as above, then the passages are
tokenized batch by batch into a flat on-disk array of token ids (the text is never held in
memory), and bm25s indexes those ids. Peak RAM is the score matrix, which is the index itself.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from treeqa.data.passage import Passage
from treeqa.retrievers import ray_embed, store
from treeqa.retrievers.encoder import EmbedFn

DIM = 384  # all-MiniLM-L6-v2
PROGRESS_FILE = "progress.json"
VECTORS_FILE = "vectors.npy"
ADD_CHUNK = 100_000
TRAIN_SAMPLE = 100_000



def choose_index(n: int) -> str:
    """The faiss factory string for `n` passages (see the module docstring)."""
    if n < 100_000:
        return "Flat"
    nlist = 1 << round(math.log2(4 * math.sqrt(n)))  # about 4·√n lists, a power of two
    return f"IVF{nlist},Flat" if n < 2_000_000 else f"IVF{nlist},SQ8"


def _save_progress(folder: Path, progress: dict) -> None:
    tmp = folder / (PROGRESS_FILE + ".tmp")
    tmp.write_text(json.dumps(progress))
    os.replace(tmp, folder / PROGRESS_FILE)


def _write_passages(staging: Path, passages: Iterable[Passage]) -> int:
    offsets = []
    with (staging / store.PASSAGES_FILE).open("wb") as fh:
        for p in passages:
            offsets.append(fh.tell())
            fh.write(store.passage_line(p).encode("utf-8"))
    np.save(staging / store.OFFSETS_FILE, np.asarray(offsets, dtype=np.int64))
    return len(offsets)


def _embed_all(staging: Path, n: int, done: int, embed_fn: EmbedFn, batch_size: int, progress: bool) -> None:
    mode = "r+" if (staging / VECTORS_FILE).is_file() else "w+"
    vectors = np.lib.format.open_memmap(staging / VECTORS_FILE, mode=mode, dtype=np.float32, shape=(n, DIM))
    passages = store.PassageStore(staging)
    with tqdm(total=n, initial=done, unit="passage", desc="embedding", disable=not progress,
              dynamic_ncols=True) as bar:
        for start in range(done, n, batch_size):
            end = min(n, start + batch_size)
            batch = np.asarray(embed_fn([p.as_text() for p in passages[start:end]]), dtype=np.float32)
            if batch.shape != (end - start, DIM):
                raise ValueError(f"the encoder returned {batch.shape} for {end - start} passages of dimension {DIM}")
            vectors[start:end] = batch
            vectors.flush()
            _save_progress(staging, {"passages": n, "embedded": end})
            bar.update(end - start)
    del vectors


def _build_index(staging: Path, n: int, index_type: str, seed: int = 0):
    import faiss  # heavy: loaded when an index is built or read, not by every command

    vectors = np.load(staging / VECTORS_FILE, mmap_mode="r")
    index = faiss.index_factory(DIM, index_type, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, TRAIN_SAMPLE), replace=False))
        index.train(np.ascontiguousarray(vectors[rows]))
    for start in range(0, n, ADD_CHUNK):
        index.add(np.ascontiguousarray(vectors[start:start + ADD_CHUNK]))
    return index


def _stage_passages(passages: Iterable[Passage], folder: Path) -> tuple[Path, dict]:
    """Step 1 into the staging folder beside `folder` (skipped when a killed build had done
    it); returns the folder and the saved progress."""
    staging = folder.parent / f".building-{folder.name}"
    staging.mkdir(parents=True, exist_ok=True)
    state = json.loads((staging / PROGRESS_FILE).read_text()) if (staging / PROGRESS_FILE).is_file() else {}
    if "passages" not in state:  # again from the start if it was cut short
        try:
            n = _write_passages(staging, passages)
        except Exception:  # bad input: nothing worth resuming, so no half-written folder stays behind
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if n == 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ValueError("cannot index an empty corpus")
        state = {"passages": n, "embedded": 0}
        _save_progress(staging, state)
    return staging, state


def build(passages: Iterable[Passage], folder: Path, meta: dict, embed_fn: EmbedFn, *, index_type: str = "auto",
          batch_size: int = 256, progress: bool = True, ray_address: str | None = None) -> Path:
    """Build (or resume building) the dense index of `passages` into `folder` (see the module doc).

    Args:
        passages: the corpus, read once, in order.
        folder: the index folder to publish (its name carries the corpus fingerprint).
        meta: extra manifest fields (name, source file, model).
        embed_fn: texts -> L2-normalised vectors of dimension 384.
        index_type: "auto" (`choose_index`) or a faiss factory string ("Flat", "IVF1024,PQ48", "HNSW32").
        batch_size: passages embedded per batch (and so between two saved checkpoints).
        ray_address: embed as a Ray Data job on this cluster instead ("local": a local Ray
            instance; see `treeqa.retrievers.ray_embed`); the encoder is then the default one.
    """

    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    started = time.perf_counter()
    staging, state = _stage_passages(passages, folder)
    n = state["passages"]
    if state["embedded"] < n and ray_address is not None:
        ray_embed.embed(staging, n, state["embedded"], ray_address, batch_size, progress, _save_progress,
                        VECTORS_FILE, DIM)
    elif state["embedded"] < n:
        _embed_all(staging, n, state["embedded"], embed_fn, batch_size, progress)
    chosen = choose_index(n) if index_type == "auto" else index_type
    import faiss  # heavy: loaded when an index is built or read, not by every command

    faiss.write_index(_build_index(staging, n, chosen), str(staging / store.INDEX_FILE))
    (staging / VECTORS_FILE).unlink()
    (staging / PROGRESS_FILE).unlink()
    store.write_manifest(staging, {"kind": "dense", "index_type": chosen, **meta,
                                   "build_seconds": round(time.perf_counter() - started, 1)}, n)
    return store.publish(staging, folder)


# --- BM25 ------------------------------------------------------------------------------------

TOKENS_FILE = "tokens.bin"


class _TokenIds(Sequence):
    """Each passage's token ids, read from the flat on-disk array (what bm25s indexes)."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        self.flat, self.offsets = flat, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.flat[self.offsets[i]:self.offsets[i + 1]]


def _tokenize_all(staging: Path, n: int, batch_size: int, progress: bool) -> tuple[_TokenIds, dict]:
    """Token ids of every passage into `tokens.bin`, batch by batch, with the vocabulary they
    grow; the tokens are those `treeqa.retrievers.bm25` gives (bm25s, English stopwords)."""
    from bm25s.tokenization import Tokenizer  # loaded where BM25 is used, not by every command


    tokenizer = Tokenizer(stopwords="en")
    passages = store.PassageStore(staging)
    offsets = [0]
    with (staging / TOKENS_FILE).open("wb") as fh, tqdm(total=n, unit="passage", desc="tokenizing",
                                                         disable=not progress, dynamic_ncols=True) as bar:
        for start in range(0, n, batch_size):
            texts = [store.bm25_text(p) for p in passages[start:start + batch_size]]
            ids = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
            empty = tokenizer.get_vocab_dict().get("")  # the id bm25s gives a passage with no words
            for doc in ids:
                doc = np.asarray([t for t in doc if t != empty], dtype=np.int32)
                fh.write(doc.tobytes())
                offsets.append(offsets[-1] + len(doc))
            bar.update(len(texts))
    if offsets[-1] == 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise ValueError(f"nothing for BM25 to index: none of the {n:,} passages has a word that is not a stopword")
    flat = np.memmap(staging / TOKENS_FILE, dtype=np.int32, mode="r")  # stays on disk
    return _TokenIds(flat, np.asarray(offsets, dtype=np.int64)), dict(tokenizer.get_vocab_dict())


def build_bm25(passages: Iterable[Passage], folder: Path, meta: dict, *, batch_size: int = 10_000,
               progress: bool = True) -> Path:
    """Build (or resume building) the BM25 index of `passages` into `folder` (see the module
    doc): a killed build keeps its passages on disk and tokenizes again, the fast step."""
    import bm25s  # loaded where BM25 is used, not by every command
    from bm25s.tokenization import Tokenized


    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    started = time.perf_counter()
    staging, state = _stage_passages(passages, folder)
    token_ids, vocab = _tokenize_all(staging, state["passages"], batch_size, progress)
    model = bm25s.BM25()
    model.index(Tokenized(ids=token_ids, vocab=vocab), show_progress=progress)
    model.save(str(staging / store.BM25_DIR))
    del token_ids
    (staging / TOKENS_FILE).unlink()
    (staging / PROGRESS_FILE).unlink()
    store.write_manifest(staging, {"kind": "bm25", "model": store.BM25_MODEL, **meta,
                                   "build_seconds": round(time.perf_counter() - started, 1)}, state["passages"])
    return store.publish(staging, folder)
