"""What the retrievers with an index on disk share: saving to and loading from an index folder,
and the registry of their kinds (`RETRIEVERS`: what `--retriever` offers), which each kind's
module fills.

A folder holds the kind's own index files, written by `_write_index` (a faiss index, bm25s'
scores), and the passages with their manifest (`store.write_passages`, whose meta names the
kind and the model); it is written into a private folder and published with a rename, and
read back only once its manifest says it is complete and every file matches it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from treeqa.data.corpus import Passage
from treeqa.registry import Registry
from treeqa.retrievers import store
from treeqa.retrievers.base import IndexMissingError, Retriever


class IndexedRetriever(Retriever):
    """A retriever whose index is a folder on disk (`save`, `load`).

    Subclasses set `kind` (what `--retriever` calls them, recorded in the folder's meta),
    `index_label` and `build_command` (for the error when no index is there) and implement
    `model_id`, `_write_index` and `_from_folder`; a kind `--retriever` offers is registered in
    `RETRIEVERS` and also implements `for_corpus`, `index_file` and `for_entry`.
    """

    kind: ClassVar[str]
    index_label: ClassVar[str]  # "no <index_label> index at <folder>"
    build_command: ClassVar[str]  # the command that builds a missing index

    @classmethod
    def model_id(cls) -> str:
        """What the index was made with (the encoder, BM25's parameters): the meta's "model"."""
        raise NotImplementedError

    def _write_index(self, folder: Path) -> None:
        """Write this kind's index files into `folder` (the passages are written apart)."""
        raise NotImplementedError

    @classmethod
    def _from_folder(cls, folder: Path, passages: list[Passage]) -> IndexedRetriever:
        """The retriever over `passages` with the index files in `folder` (checked against them)."""
        raise NotImplementedError

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
            raise IndexMissingError(f"no {cls.index_label} index at {folder}; build it with `{cls.build_command}`")
        passages, _ = store.read_passages(folder)  # checks every file against the manifest
        return cls._from_folder(folder, passages)

    # --- what `treeqa.retrievers` asks of each kind in RETRIEVERS --------------------------------

    @classmethod
    def for_corpus(cls, passages: list[Passage], index_root: Path, name: str,
                   build: bool = True) -> IndexedRetriever:
        """The index of this exact corpus under `index_root`, built there if allowed."""
        raise NotImplementedError

    @classmethod
    def index_file(cls, path: Path, index_root: Path, name: str, chunk_words: int | None,
                   index_type: str = "auto", batch_size: int = 256, embed_fn=None,
                   ray_address: str | None = None) -> tuple[IndexedRetriever, dict[str, Any]]:
        """Index your own corpus file (`build_corpus_index`), refusing options this kind has no
        use for; returns the retriever and what the corpus registry keeps to open it again."""
        raise NotImplementedError

    @classmethod
    def for_entry(cls, entry: dict[str, Any], index_root: Path, name: str, build: bool = True) -> IndexedRetriever:
        """The index of a registered corpus (`entry`: what `index_file` had the corpus registry keep)."""
        raise NotImplementedError


# `--retriever` name -> its class; each kind's module registers its class
RETRIEVERS: Registry[type[IndexedRetriever]] = Registry("retriever")
