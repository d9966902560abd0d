"""Indexes on disk, each in a folder named by a fingerprint of its corpus and model.

A changed corpus or embedding model gives a new fingerprint, so a stale index is never
loaded; it is rebuilt instead.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from treeqa.data.corpus import Passage

PASSAGES_FILE = "passages.jsonl"
META_FILE = "meta.json"


def fingerprint(passages: list[Passage], model: str) -> str:
    digest = hashlib.sha256(model.encode())
    for p in passages:
        digest.update(b"\0" + p.id.encode() + b"\0" + p.title.encode() + b"\0" + p.text.encode())
    return digest.hexdigest()[:16]


def write_passages(folder: Path, passages: list[Passage], meta: dict) -> None:
    with (folder / PASSAGES_FILE).open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
    (folder / META_FILE).write_text(json.dumps(meta, indent=2))


def read_passages(folder: Path) -> tuple[list[Passage], dict]:
    meta = json.loads((folder / META_FILE).read_text())
    with (folder / PASSAGES_FILE).open(encoding="utf-8") as fh:
        passages = [Passage(**json.loads(line)) for line in fh]
    return passages, meta


def is_complete(folder: Path) -> bool:
    return (folder / META_FILE).is_file()


def publish(tmp: Path, final: Path) -> Path:
    """Move a fully written index into place, so a crash never leaves half an index."""
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final
