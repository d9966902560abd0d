"""Committed lists of official question ids (`treeqa/data/samples/`): the samples our figures
name, and the records our subset files hold, so anyone can select exactly those questions.

A list is a text file, one id a line (blank lines and `#` comments ignored). `index.json`
names each list's dataset, split and how it was drawn. This module only reads files: it must
not import the loaders, which use it to cut an official full file to our subset.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path

SAMPLES_DIR = Path(__file__).parent / "samples"
INDEX_FILE = SAMPLES_DIR / "index.json"
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


class SampleError(ValueError):
    """An id list or a sample name that cannot be used."""


MAX_IDS_BYTES = 16 << 20  # ~500,000 ids; far more than any split holds, so /dev/zero is not read to the end


def read_ids(path: Path) -> list[str]:
    """The ids of a list file, in order (a UTF-8 byte-order mark, as Windows editors write one, is
    not part of the first id); an empty list, an id given twice, or a file over MAX_IDS_BYTES is
    refused."""
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_IDS_BYTES + 1)
        if len(data) > MAX_IDS_BYTES:
            raise SampleError(f"{path} is over {MAX_IDS_BYTES >> 20} MB: not a list of question ids")
        text = data.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SampleError(f"cannot read the id list {path}: {exc}") from exc
    ids = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not ids:
        raise SampleError(f"{path} holds no question ids (one a line)")
    seen: set[str] = set()
    twice = [i for i in ids if i in seen or seen.add(i)]
    if twice:
        raise SampleError(f"{path} names {twice[0]!r} twice: a sample asks each question once")
    return ids


def ids_sha256(ids: list[str]) -> str:
    """The hash a run's spec records: the ids one a line, in order."""
    return hashlib.sha256("".join(f"{i}\n" for i in ids).encode("utf-8")).hexdigest()


@cache
def index() -> dict[str, dict]:
    """name -> {dataset, split, drawn, used_by}: every committed list."""
    return json.loads(INDEX_FILE.read_text(encoding="utf-8"))


def sample_info(name: str) -> dict:
    """What the index says of `name`; an unknown name is an error listing the samples."""
    if name not in index():
        named = ", ".join(n for n in index() if not n.endswith("-subset"))
        raise SampleError(f"no sample {name!r}; committed samples: {named}")
    return index()[name]


def sample_ids(name: str) -> list[str]:
    """The ids of the committed sample `name`."""
    sample_info(name)
    return read_ids(SAMPLES_DIR / f"{name}.txt")


def subset_name(dataset: str, split: str) -> str:
    """The list of the records our copy of a split holds (e.g. `hotpotqa-dev-subset`)."""
    return f"{dataset}-{split}-subset"
