"""What the `train` commands write, claimed before any work as `evaluate` and `optimize` claim their
folders: a folder of the user's, or a file this command did not write, is refused by name, never
written over."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from pathlib import Path

# the names each folder-writing command writes (patterns), and how its own folder is told apart
READS_FILES = ("reads.jsonl", "reads.jsonl.tmp", "manifest.json", "reasons.jsonl", "*-scores.jsonl")
LORA_FILES = ("train-data.jsonl", "training.json", "curve.json", "adapter.gguf", "adapter.gguf.tmp", "checkpoint.pt",
              "checkpoint.pt.tmp", "best-*.pt", "layer-cache")
READER_FILES = ("reads", "lora", "reader.json")


def _json_with(path: Path, *keys: str) -> bool:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and all(k in doc for k in keys)


def reads_folder_is_ours(folder: Path) -> bool:
    """A reader set's folder: no set yet, or a manifest that records its reads' sha256."""
    if not (folder / "reads.jsonl").exists() and not (folder / "manifest.json").exists():
        return True
    return _json_with(folder / "manifest.json", "reads_sha256", "settings")


def lora_folder_is_ours(folder: Path) -> bool:
    """A training's folder: its record or checkpoint, or no training data of anyone's yet."""
    if not (folder / "train-data.jsonl").exists() and not (folder / "training.json").exists():
        return True
    return _json_with(folder / "training.json", "recipe") or (folder / "checkpoint.pt").is_file()


def reader_folder_is_ours(folder: Path) -> bool:
    if (folder / "reader.json").exists() and not _json_with(folder / "reader.json", "recipe", "reads"):
        return False
    return reads_folder_is_ours(folder / "reads") and lora_folder_is_ours(folder / "lora")


def claim_folder(folder: Path, writes: tuple[str, ...], ours: Callable[[Path], bool], command: str) -> None:
    """Refuse `folder` unless it is new, empty, or this command's own: a file in its place, a name
    this command never writes, or its names written by something else."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file, not a folder")
    if not folder.is_dir():
        return
    strangers = sorted(p.name for p in folder.iterdir() if not any(fnmatch.fnmatch(p.name, w) for w in writes))
    if strangers:
        shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
        raise ValueError(f"--out {folder} holds what `{command}` does not write ({shown}): give a new or empty folder")
    if not ours(folder):
        raise ValueError(f"--out {folder} holds files `{command}` writes that it did not write (no record of its "
                         "own beside them): give a new or empty folder")


def claim_file(path: Path, ours: Callable[[Path], bool], what: str) -> None:
    """Refuse an existing `path` that is not `what` (a folder, or a file of another kind)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not {what}")
    if path.exists() and not ours(path):
        raise ValueError(f"{path} exists and is not {what}: nothing is written over it; give a new file")


def is_compiled_file(path: Path) -> bool:
    return _json_with(path, "treeqa")


def is_scores_file(path: Path) -> bool:
    """A `train score` file: empty, or JSON lines each with a read's id and EM (a torn last line allowed)."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        return False
    for line in lines[:-1] or lines:
        try:
            rec = json.loads(line)
        except ValueError:
            return line is lines[-1]
        if not (isinstance(rec, dict) and "id" in rec and "em" in rec):
            return False
    return True
