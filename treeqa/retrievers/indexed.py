"""What the retrievers with an index on disk share: saving to and loading from an index folder,
finding the index of a corpus or building it (`for_corpus`, `for_file`: once here, so a new kind
writes only how it builds, saves and loads), and the registry of their kinds (`RETRIEVERS`: what
`--retriever` offers), which each kind's module fills.

A folder holds the kind's own index files, written by `_write_index` (a faiss index, bm25s'
scores), and the passages with their manifest (`store.write_passages`, whose meta names the
kind and the model); it is written into a private folder and published with a rename, and
read back only once its manifest says it is complete and every file matches it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from treeqa.data.corpus import Passage
from treeqa.data.jsonl_corpus import file_fingerprint, read_jsonl_corpus
from treeqa.registry import Registry
from treeqa.retrievers import store
from treeqa.retrievers.base import IndexMissingError, Retriever

DEFAULT_KIND = "dense"  # what `--retriever` searches with when none is named


class IndexedRetriever(Retriever):
    """A retriever whose index is a folder on disk (`save`, `load`), found or built for a corpus
    (`for_corpus`, `for_file`, `for_entry`).

    Subclasses set `kind` (what `--retriever` calls them, recorded in the folder's meta) and
    `index_label` (for the error when no index is there) and implement `model_id`, `build`,
    `_write_index`, `_from_folder`, `_build_stream` and `_file_options`; a kind `--retriever`
    offers is registered in `RETRIEVERS`.
    """

    kind: ClassVar[str]
    index_label: ClassVar[str]  # "no <index_label> index at <folder>"
    # a corpus file's streamed build (`_build_stream`): its options and their defaults; those in
    # `fingerprint_options` change the index (and so its folder's name), those in `kept_options`
    # are kept in the corpus registry to open the index again
    file_options: ClassVar[dict[str, Any]] = {}
    fingerprint_options: ClassVar[tuple[str, ...]] = ()
    kept_options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def model_id(cls) -> str:
        """What the index was made with (the encoder, BM25's parameters): the meta's "model"."""
        raise NotImplementedError

    @classmethod
    def build(cls, passages: list[Passage], progress: bool = True) -> IndexedRetriever:
        """Index `passages` in memory."""
        raise NotImplementedError

    def _write_index(self, folder: Path) -> None:
        """Write this kind's index files into `folder` (the passages are written apart)."""
        raise NotImplementedError

    @classmethod
    def _from_folder(cls, folder: Path, passages: list[Passage]) -> IndexedRetriever:
        """The retriever over `passages` with the index files in `folder` (checked against them)."""
        raise NotImplementedError

    @classmethod
    def _build_stream(cls, passages: Iterable[Passage], folder: Path, meta: dict, **options: Any) -> None:
        """Build the index of a corpus read as a stream into `folder`, with the manifest's `meta`
        (resuming a build that was killed; see `treeqa.retrievers.streaming`)."""
        raise NotImplementedError

    @classmethod
    def _file_options(cls, index_type: str, batch_size: int, embed_fn, ray_address: str | None) -> dict[str, Any]:
        """What `build_corpus_index`'s options mean to this kind: its `file_options` for
        `for_file`, refusing an option it has no use for."""
        raise NotImplementedError

    @classmethod
    def build_command(cls, *args: str) -> str:
        """The command that builds this kind's index, with `args` naming the corpus."""
        kind = () if cls.kind == DEFAULT_KIND else ("--retriever", cls.kind)
        return " ".join(("treeqa index build", *args, *kind))

    def save(self, folder: Path, meta: dict | None = None) -> Path:
        """Write the index and the passages to `folder` at once (a private folder renamed)."""
        folder = Path(folder)
        with store.staging(folder) as tmp:
            self._write_index(tmp)
            store.write_passages(tmp, self.passages, {"kind": self.kind, "model": self.model_id(), **(meta or {})})
        return store.publish(tmp, folder)

    @classmethod
    def load(cls, folder: Path) -> IndexedRetriever:
        """The index saved in `folder`; `IndexMissingError` where none is complete there."""
        folder = Path(folder)
        if not store.is_complete(folder):
            raise IndexMissingError(f"no {cls.index_label} index at {folder}; build it with `{cls.build_command()}`")
        passages, _ = store.read_passages(folder)  # checks every file against the manifest
        return cls._from_folder(folder, passages)

    # --- what `treeqa.retrievers` asks of each kind in RETRIEVERS --------------------------------

    @classmethod
    def for_corpus(cls, passages: list[Passage], index_root: Path, name: str,
                   build: bool = True) -> IndexedRetriever:
        """The index of this exact corpus and model under `index_root`, built there if allowed
        (and rebuilt if its files no longer match their manifest)."""
        folder = store.corpus_folder(index_root, name, f"{cls.kind}-{store.fingerprint(passages, cls.model_id())}")

        def build_and_save() -> IndexedRetriever:
            started = time.perf_counter()
            retriever = cls.build(passages)
            retriever.save(folder, {"name": name, "build_seconds": round(time.perf_counter() - started, 1)})
            return retriever

        return store.load_or_build(folder, cls.load, build_and_save if build else None,
                                   cls.build_command("--dataset", name))

    @classmethod
    def for_file(cls, path: str | Path, index_root: Path, name: str, chunk_words: int | None = 100,
                 build: bool = True, **options: Any) -> IndexedRetriever:
        """The index of a JSONL corpus file (see `treeqa.data.jsonl_corpus`), built as a stream
        (`_build_stream`, with `options` from `file_options`) when missing or corrupt."""
        unknown = sorted(set(options) - set(cls.file_options))
        if unknown:
            raise TypeError(f"{cls.__name__}.for_file takes no {', '.join(unknown)}")
        options = {**cls.file_options, **options}
        key = "|".join([cls.model_id(), file_fingerprint(path, chunk_words),
                        *(str(options[o]) for o in cls.fingerprint_options)])
        folder = Path(index_root) / f"{name}-corpus-{cls.kind}-{store.fingerprint([], key)}"

        def build_and_save() -> IndexedRetriever:
            meta = {"name": name, "source": str(Path(path).resolve()), "chunk_words": chunk_words,
                    "model": cls.model_id()}
            cls._build_stream(read_jsonl_corpus(path, chunk_words), folder, meta, **options)
            return cls.load(folder)

        return store.load_or_build(folder, cls.load, build_and_save if build else None,
                                   cls.build_command("--corpus-file", str(path), "--name", name))

    @classmethod
    def index_file(cls, path: Path, index_root: Path, name: str, chunk_words: int | None,
                   index_type: str = "auto", batch_size: int = 256, embed_fn=None,
                   ray_address: str | None = None) -> tuple[IndexedRetriever, dict[str, Any]]:
        """Index your own corpus file (`build_corpus_index`), refusing options this kind has no
        use for; returns the retriever and what the corpus registry keeps to open it again."""
        options = cls._file_options(index_type, batch_size, embed_fn, ray_address)
        retriever = cls.for_file(path, index_root, name, chunk_words, **options)
        return retriever, {o: options[o] for o in cls.kept_options}

    @classmethod
    def for_entry(cls, entry: dict[str, Any], index_root: Path, name: str, build: bool = True) -> IndexedRetriever:
        """The index of a registered corpus (`entry`: what `index_file` had the corpus registry keep)."""
        kept = {o: entry[o] for o in cls.kept_options if o in entry}
        return cls.for_file(entry["file"], index_root, name, entry["chunk_words"], build=build, **kept)


# `--retriever` name -> its class; each kind's module registers its class
RETRIEVERS: Registry[type[IndexedRetriever]] = Registry("retriever")
