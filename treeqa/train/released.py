"""The released reader: one LoRA adapter on rta's reader, trained by `train_reader` from every
question we may train on, shipped in the package (`released/adapter.gguf`, f16) with its record
(`released/reader.json`: the reads' settings and sha256, the recipe, the base model's sha256,
the curve, the command that rebuilds it).

Why ship it: training is hours on two cores, and the default compile of ToR and the beam reads
through it. A compile reuses it when what the compile would train matches its record: the reads'
settings (hence, on the same data, the same reads), the recipe's learned part and the base model.
Anything else is refused by name, never used silently (`--reader train` trains one instead).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treeqa.lm.adapter import sha256_of
from treeqa.settings import RELEASED_READER_DIR
from treeqa.train.reader import ReaderRecipe, recipe_differences

RELEASED_DIR = RELEASED_READER_DIR
# how the released reader was trained: `train_reader` with its defaults, from a frozen checkout
REBUILD_COMMAND = "treeqa train reader --out DIR"


class ReleasedReaderError(ValueError):
    """The released reader is missing, altered, or does not fit what the compile asks for."""


@dataclass(frozen=True)
class ReleasedReader:
    """The adapter file (its sha256 checked against the record) and the record."""

    adapter: Path
    record: dict[str, Any]

    @property
    def reads_sha256(self) -> str:
        return self.record["reads"]["sha256"]


def released_reader(folder: Path | None = None) -> ReleasedReader:
    """The released reader in `folder` (default: the package's), its adapter's sha256 checked
    against its record."""
    folder = Path(folder) if folder is not None else RELEASED_DIR
    record_file, adapter = folder / "reader.json", folder / "adapter.gguf"
    if not record_file.is_file() or not adapter.is_file():
        raise ReleasedReaderError(f"{folder}: no released reader here (reader.json and adapter.gguf); "
                                  "train one with --reader train, or compile with --reader none")
    try:
        record = json.loads(record_file.read_text(encoding="utf-8"))
        wanted = record["adapter"]["sha256"]
        record["recipe"], record["reads"]["settings"], record["base_sha256"]  # noqa: B018 - a torn record
    except (ValueError, KeyError, TypeError) as exc:
        raise ReleasedReaderError(f"{record_file}: not a reader record ({type(exc).__name__}: {exc})") from None
    if sha256_of(adapter) != wanted:
        raise ReleasedReaderError(f"{adapter}: its sha256 is not the one {record_file} records; reinstall treeqa "
                                  "or retrain it with --reader train")
    return ReleasedReader(adapter, record)


def differences(released: ReleasedReader, recipe: ReaderRecipe, base_sha256: str,
                reads_settings: dict[str, Any]) -> list[str]:
    """What keeps the released reader from being the one this compile would train: the base model,
    the recipe's learned part, the reads' settings; empty when it fits."""
    out = []
    if released.record["base_sha256"] != base_sha256:
        out.append(f"base model: {released.record['base_sha256'][:12]}… != {base_sha256[:12]}…")
    out += recipe_differences(released.record["recipe"], recipe)
    recorded = released.record["reads"]["settings"]
    out += [f"reads.{k}: {recorded.get(k)!r} != {v!r}" for k, v in reads_settings.items() if recorded.get(k) != v]
    out += [f"reads.{k}: {recorded[k]!r} != (unset)" for k in recorded if k not in reads_settings]
    return out


def release(trained: Path, folder: Path | None = None, **extra: Any) -> Path:
    """Make the reader `train_reader` wrote in `trained` the released one: its adapter copied into
    `folder` (default: the package's) as adapter.gguf, and its record as reader.json with `extra`
    (the checkout it was trained from, the machine, its validation figures) and the command that
    rebuilds it. Returns the folder."""
    record = json.loads((Path(trained) / "reader.json").read_text(encoding="utf-8"))
    source = Path(trained) / record["adapter"]["file"]
    if sha256_of(source) != record["adapter"]["sha256"]:
        raise ReleasedReaderError(f"{source}: its sha256 is not the one {trained}/reader.json records")
    folder = Path(folder) if folder is not None else RELEASED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, folder / "adapter.gguf")
    record["adapter"]["file"] = "adapter.gguf"
    record.update({"command": REBUILD_COMMAND, **extra})
    (folder / "reader.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    released_reader(folder)  # what was written reads back whole
    return folder


def add_yes_no(fit: dict[str, Any], command: str, folder: Path | None = None) -> Path:
    """Record a yes/no calibration fitted on the released reader (`treeqa train yes-no`) in its
    record, `yes_no`, with the command that fitted it; the fit must be of the reads the reader was
    trained on. Returns the record's path."""
    released = released_reader(folder)
    if fit.get("reads_sha256") != released.reads_sha256:
        raise ReleasedReaderError(f"the yes/no fit is of reads {str(fit.get('reads_sha256'))[:12]}…, the released "
                                  f"reader's are {released.reads_sha256[:12]}…")
    path = released.adapter.parent / "reader.json"
    record = dict(released.record, yes_no={**fit, "command": command})
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path
