"""The corpus registry: one small JSON file per corpus name, saying which file was indexed under
that name and how (`build_corpus_index` writes it, `--corpus NAME` reads it).

Two builds of one name may run at once, so an entry is read, changed and written under a file
lock, and replaced whole (a temporary file, then `os.replace`): a reader never sees half a file
and no build's change is lost. A file torn some other way (a full disk, an older treeqa) is an
error naming it, and the next build of the name writes it afresh.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from treeqa.retrievers.base import IndexMissingError

log = logging.getLogger(__name__)


class CorpusRegistryError(IndexMissingError):
    """A registry file that cannot be read; building the corpus again under its name mends it."""


def read_entry(registry: Path, name: str) -> dict[str, Any]:
    """The entry in `registry` (corpus `name`), or `CorpusRegistryError` naming the file when it is
    not a whole entry."""
    try:
        entry = json.loads(registry.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CorpusRegistryError(_torn(registry, name, f"not JSON ({str(exc)[:80]})")) from None
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        raise CorpusRegistryError(_torn(registry, name, "not a corpus entry (no 'file')"))
    return entry


def update_entry(registry: Path, name: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Write `change(entry)` as the entry of `name`, under the registry's lock and atomically; a
    torn entry is changed as if absent (this is how a new build mends it)."""
    registry.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(registry.parent / f".{registry.name}.lock"):
        entry: dict[str, Any] = {}
        if registry.is_file():
            try:
                entry = read_entry(registry, name)
            except CorpusRegistryError as exc:
                log.warning("%s; writing it afresh", exc)
        entry = change(entry)
        _replace(registry, json.dumps(entry, indent=2))
    return entry


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a temporary file beside it, flushed, then renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _torn(registry: Path, name: str, why: str) -> str:
    return (f"{registry}: the registry entry of corpus {name!r} is torn: {why}; index the corpus again with "
            f"`treeqa index build --corpus-file FILE.jsonl --name {name}`")
