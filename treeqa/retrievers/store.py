"""Indexes on disk, each in a folder named by a fingerprint of its corpus and model.

A changed corpus or embedding model gives a new fingerprint, so a stale index is never
loaded; it is rebuilt instead. Each folder's `meta.json` is its manifest: the passage count
and the size and sha256 of every file, written last, so a folder without it is unfinished.
Loading checks the manifest, so a truncated or edited file is found before it gives wrong
results: the index is rebuilt where building is allowed, else refused with the command that
rebuilds it. Builds of one folder take a file lock, write into a private temporary folder
and publish it with a rename: concurrent builds wait for each other and leave no debris.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from filelock import FileLock

from treeqa.data.corpus import Passage
from treeqa.retrievers.base import IndexMissingError

PASSAGES_FILE = "passages.jsonl"
OFFSETS_FILE = "offsets.npy"  # byte offset of each line of passages.jsonl (streamed builds)
META_FILE = "meta.json"
# each kind's files, shared by its build (`streaming`) and its search (`dense`, `bm25`), so
# neither imports the other
INDEX_FILE = "index.faiss"  # a dense index
BM25_DIR = "bm25"  # a BM25 index's scores (bm25s' own files)
BM25_MODEL = "bm25s-lucene-k1.5-b0.75-english-stopwords"


def bm25_text(passage: Passage) -> str:
    """What BM25 indexes of a passage: its title, then its text."""
    return f"{passage.title} {passage.text}"

log = logging.getLogger(__name__)


class IndexCorruptError(IndexMissingError):
    """An index folder whose files do not match its manifest; the message names the rebuild."""


def fingerprint(passages: list[Passage], model: str) -> str:
    digest = hashlib.sha256(model.encode())
    for p in passages:
        digest.update(b"\0" + p.id.encode() + b"\0" + p.title.encode() + b"\0" + p.text.encode())
    return digest.hexdigest()[:16]


FULL_HASH_BYTES = 2 << 30  # files above this are checked by size and a hash of their first and last 64 MB
_SAMPLE = 64 << 20


def _file_digest(path: Path) -> dict:
    """Size and sha256 of a file; a file over `FULL_HASH_BYTES` (a Wikipedia-scale index) is
    hashed on its first and last 64 MB only, so loading it does not read it twice."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        if size <= FULL_HASH_BYTES:
            while block := fh.read(8 << 20):
                digest.update(block)
            return {"bytes": size, "sha256": digest.hexdigest()}
        digest.update(fh.read(_SAMPLE))
        fh.seek(size - _SAMPLE)
        digest.update(fh.read(_SAMPLE))
    return {"bytes": size, "sha256_ends": digest.hexdigest()}


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != META_FILE)


def passage_line(p: Passage) -> str:
    return json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n"


def write_passages(folder: Path, passages: list[Passage], meta: dict) -> None:
    """Write the passages, then the manifest of every file in `folder` (so index files first)."""
    with (folder / PASSAGES_FILE).open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(passage_line(p))
    write_manifest(folder, meta, len(passages))


def write_manifest(folder: Path, meta: dict, count: int) -> None:
    """The manifest of every file in `folder`, written last: the folder is complete from then on."""
    files = {str(p.relative_to(folder)): _file_digest(p) for p in _files(folder)}
    (folder / META_FILE).write_text(json.dumps({**meta, "count": count, "files": files}, indent=2))


def verify(folder: Path) -> dict:
    """The manifest, once every file it lists has its recorded size and sha256."""
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexCorruptError(f"{folder / META_FILE}: unreadable manifest ({exc})") from exc
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, dict) or PASSAGES_FILE not in files:
        raise IndexCorruptError(f"{folder}: the manifest lists no files (an index from before manifests)")
    for name, expected in files.items():
        path = folder / name
        if not isinstance(expected, dict) or Path(name).is_absolute() or ".." in Path(name).parts:
            raise IndexCorruptError(f"{folder / META_FILE}: its entry for {name!r} is not a file record")
        if not path.is_file():
            raise IndexCorruptError(f"{path}: missing")
        if path.stat().st_size != expected.get("bytes") or _file_digest(path) != expected:
            raise IndexCorruptError(f"{path}: its size or checksum differs from the manifest (truncated or edited)")
    return meta


def read_passages(folder: Path) -> tuple[list[Passage], dict]:
    """The passages of a verified folder, and its manifest. A folder with an offsets file (a
    streamed build) gives a `PassageStore`, which reads passages from disk on demand."""
    meta = verify(folder)
    if (folder / OFFSETS_FILE).is_file():
        passages = PassageStore(folder)
    else:
        with (folder / PASSAGES_FILE).open(encoding="utf-8") as fh:
            passages = [Passage(**json.loads(line)) for line in fh]
    if len(passages) != meta.get("count"):
        raise IndexCorruptError(f"{folder}: {len(passages)} passages, the manifest says {meta.get('count')}")
    return passages, meta


class PassageStore(Sequence[Passage]):
    """The passages of an index folder read from disk on demand: RAM holds 8 bytes a passage
    (its line's offset), not the corpus, so a Wikipedia-scale index loads in seconds."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / PASSAGES_FILE
        self.offsets = np.load(Path(folder) / OFFSETS_FILE, mmap_mode="r")
        self._fh = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        with self._lock:  # one file handle, shared by the threads that search
            if self._fh is None:
                self._fh = self.path.open("rb")
            self._fh.seek(int(self.offsets[i]))
            line = self._fh.readline()
        return Passage(**json.loads(line))

    def __eq__(self, other):
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    def __getstate__(self):  # copied or pickled: reopen the file on use
        return {**self.__dict__, "_fh": None, "_lock": None}

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock())


def is_complete(folder: Path) -> bool:
    return (folder / META_FILE).is_file()


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold the lock for building `folder` (another process waits until the build is published)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.parent / f".{folder.name}.lock"):
        yield


@contextmanager
def staging(final: Path) -> Iterator[Path]:
    """A private temporary folder beside `final`, removed if writing it fails."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".building-{final.name}-"))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish(tmp: Path, final: Path) -> Path:
    """Move a fully written index into place; an old folder there is moved aside, then removed."""
    old = None
    if final.exists():
        old = final.with_name(f".old-{final.name}-{os.getpid()}")
        final.rename(old)
    tmp.rename(final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def corpus_folder(index_root: Path, name: str, kind_and_fingerprint: str) -> Path:
    """Where the index of a corpus lives: `<name>-<kind>-<fingerprint>`, or a complete index of
    the same corpus and model already built there under another name.

    Datasets can share a corpus (NQ, TriviaQA and WebQ all search the Wikipedia leads plus the NQ
    gold passages): the copy built first serves the others instead of each embedding the same
    passages again."""
    folder = Path(index_root) / f"{name}-{kind_and_fingerprint}"
    if is_complete(folder) or not folder.parent.is_dir():
        return folder
    for other in sorted(folder.parent.glob(f"*-{kind_and_fingerprint}")):
        if is_complete(other):
            return other
    return folder


def load_or_build(folder: Path, load: Callable[[Path], object], build: Callable[[], object] | None,
                  command: str):
    """Load the index in `folder`, building (or rebuilding a corrupt one) under the lock when
    `build` is given; otherwise a missing or corrupt index names `command`."""
    if is_complete(folder):
        try:
            return load(folder)
        except IndexCorruptError as exc:
            if build is None:
                raise IndexCorruptError(f"{exc}; rebuild it with `{command}`") from exc
            log.warning("%s; rebuilding it", exc)
    if build is None:
        raise IndexMissingError(f"no index at {folder}; run `{command}`")
    with build_lock(folder):
        if is_complete(folder):  # built by another process while this one waited, or corrupt
            try:
                return load(folder)
            except IndexCorruptError:
                pass
        return build()
