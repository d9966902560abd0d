"""LoRA adapters for the embedded model: written in llama.cpp's GGUF adapter format, recorded
with their size and sha256, and checked before the engine loads them.

llama.cpp reads an adapter as a GGUF file with `general.type = "adapter"`, the base model's
architecture, `adapter.type = "lora"` and `adapter.lora.alpha` (a float32), and for each
adapted weight `blk.N.<name>.weight.lora_a` (rank x in) and `.lora_b` (out x rank); it scales
the update by alpha / rank, as peft does. A compiled program names its adapter by a path
relative to the compiled file, with the hash: a missing or changed file is a one-line error,
never a silently different model. What the file holds is then compared with the base model
(`treeqa.lm.adapter_check`), since a record travels with the file it describes. The engine loads
a private copy of the very bytes that were hashed (`private_copy`), so a file swapped in the
compiled file's folder after the check is never read.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from treeqa.lm._weights import sha256_of
from treeqa.lm.adapter_check import GGUF_NAMES, AdapterError, check_adapter
from treeqa.settings import RELEASED_READER_DIR, get_settings

_PEFT_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")
SHIPPED_ADAPTER = RELEASED_READER_DIR / "adapter.gguf"  # the released reader's, package data
MAX_ADAPTER_BYTES = 512 << 20  # a rank-64 adapter on every layer of a 1.5B model is ~150 MB


def gguf_tensors(lora_state: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp tensor name -> float32 array, from a peft LoRA state dict."""
    out = {}
    for key, value in lora_state.items():
        match = _PEFT_KEY.search(key)
        if not match:
            raise AdapterError(f"not a LoRA weight of a known projection: {key}")
        layer, proj, which = match.groups()
        if proj not in GGUF_NAMES:
            raise AdapterError(f"no llama.cpp name for the projection {proj!r}")
        out[f"blk.{layer}.{GGUF_NAMES[proj]}.weight.lora_{which.lower()}"] = (
            value.detach().float().cpu().numpy())
    if not out:
        raise AdapterError("the LoRA state holds no weights")
    return out


def write_adapter(lora_state: dict[str, Any], path: str | Path, *, alpha: float, architecture: str = "qwen2",
                  name: str = "treeqa-lora", dtype: str = "f16") -> Path:
    """Write a peft LoRA state dict as a llama.cpp GGUF adapter at `path` (atomically), its
    tensors in f16 (half the bytes of f32: trained LoRA factors are small numbers well inside
    f16's range and precision) or `dtype="f32"`."""
    # gguf (~0.1 s) loads when an adapter is written, not with treeqa.lm
    import gguf

    if dtype not in ("f16", "f32"):
        raise ValueError(f"adapter dtype is f16 or f32, got {dtype!r}")

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string("general.name", name)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(alpha))
    for tensor_name, array in sorted(gguf_tensors(lora_state).items()):
        writer.add_tensor(tensor_name, array.astype(np.float16) if dtype == "f16" else array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path


def adapter_from_checkpoint(checkpoint: str | Path, path: str | Path, *, alpha: float,
                            architecture: str = "qwen2") -> tuple[Path, int]:
    """Write the LoRA weights of a training checkpoint (`treeqa.lm.lora`) as an adapter: what a
    stopped or still running training has learned so far. Returns (adapter, examples trained)."""
    import torch  # heavy: only a training checkpoint needs it

    state = torch.load(Path(checkpoint), weights_only=True)
    return write_adapter(state["lora"], path, alpha=alpha, architecture=architecture), int(state["step"])


def read_adapter(path: str | Path) -> dict[str, Any]:
    """(metadata, tensor shapes) of a GGUF adapter, refusing what llama.cpp would not load."""
    import gguf  # ~0.1 s: loaded when an adapter is read, not with treeqa.lm

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the same answer: not an adapter
        raise AdapterError(f"{path}: not a GGUF file ({type(exc).__name__}: {exc})") from None

    def field(key: str):
        f = reader.fields.get(key)
        return None if f is None else f.contents()

    if field("general.type") != "adapter" or field("adapter.type") != "lora":
        raise AdapterError(f"{path}: not a LoRA adapter (general.type={field('general.type')!r})")
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    return {"architecture": field("general.architecture"), "alpha": field("adapter.lora.alpha"), "shapes": shapes}


@dataclass(frozen=True)
class AdapterRef:
    """An adapter as a compiled program records it.

    Args:
        file: the adapter's path, relative to the compiled file's folder.
        sha256: its hash when it was written.
        bytes: its size.
        base_sha256: the base model it was trained on (the embedded GGUF's hash).
        predictors: the predictors that answer through it.
    """

    file: str
    sha256: str
    bytes: int
    base_sha256: str
    predictors: tuple[str, ...]

    @classmethod
    def of(cls, path: Path, relative_to: Path, base_sha256: str, predictors) -> AdapterRef:
        path = Path(path)
        return cls(file=str(path.resolve().relative_to(Path(relative_to).resolve())), sha256=sha256_of(path),
                   bytes=path.stat().st_size, base_sha256=base_sha256, predictors=tuple(predictors))

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "sha256": self.sha256, "bytes": self.bytes, "base_sha256": self.base_sha256,
                "predictors": list(self.predictors)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> AdapterRef:
        if not isinstance(data, dict):
            raise AdapterError(f"{where}: 'adapter' must be an object")
        try:
            ref = cls(file=str(data["file"]), sha256=str(data["sha256"]), bytes=_whole_number(data["bytes"]),
                      base_sha256=str(data["base_sha256"]), predictors=tuple(str(p) for p in data["predictors"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise AdapterError(f"{where}: 'adapter' needs file, sha256, bytes, base_sha256 and predictors "
                               f"({exc})") from None
        if Path(ref.file).is_absolute() or ".." in Path(ref.file).parts:
            raise AdapterError(f"{where}: the adapter must sit beside the compiled file, not at {ref.file!r}")
        return ref

    def is_shipped(self) -> bool:
        """Whether the recorded adapter is the released reader's, which the package ships: a compiled
        file of the main command loads with no copy beside it (the clone tracks none)."""
        return (SHIPPED_ADAPTER.is_file() and SHIPPED_ADAPTER.stat().st_size == self.bytes
                and sha256_of(SHIPPED_ADAPTER) == self.sha256)

    def verified_path(self, folder: Path, base_sha256: str | None) -> Path:
        """The path the engine loads: a private copy of the adapter's bytes once their size and
        hash match the record and it was trained on this base model; otherwise a one-line
        AdapterError naming what differs."""
        path = Path(folder) / self.file
        _refuse_links(Path(folder), Path(self.file))
        if not path.is_file() and self.is_shipped():
            path = SHIPPED_ADAPTER  # the same bytes (checked below), shipped with the package
        if not path.is_file():
            raise AdapterError(f"adapter {path} is missing (the compiled program was trained with it)")
        size = path.stat().st_size
        if size > MAX_ADAPTER_BYTES:
            raise AdapterError(f"adapter {path} is {size:,} bytes; an adapter is at most {MAX_ADAPTER_BYTES:,} "
                               "(a rank-64 adapter on every layer is ~150 MB)")
        if size != self.bytes:
            raise AdapterError(f"adapter {path} is {size:,} bytes, the compiled program recorded {self.bytes:,}")
        if base_sha256 is not None and self.base_sha256 != base_sha256:  # None: no local model to match
            raise AdapterError(f"adapter {path} was trained on base model {self.base_sha256[:12]}, "
                               f"this engine runs {base_sha256[:12]}")
        data = path.read_bytes()
        if len(data) != self.bytes or hashlib.sha256(data).hexdigest() != self.sha256:
            raise AdapterError(f"adapter {path} changed since it was trained (sha256 differs from the record)")
        return private_copy(data, self.sha256)


def private_copy(data: bytes, sha256: str) -> Path:
    """The hashed bytes, written once under the cache dir and named by their hash (read-only):
    what the engine loads is what was checked, whatever happens to the compiled file's folder
    afterwards (a shared or downloaded folder is not ours to trust between check and load)."""
    folder = get_settings().cache_dir / "adapters"
    target = folder / f"{sha256}.gguf"
    if target.is_file() and not target.is_symlink() and sha256_of(target) == sha256:
        return target
    part = folder / f".{sha256}.{os.getpid()}.part"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        part.write_bytes(data)
        part.chmod(0o444)
        os.replace(part, target)
    except OSError as exc:
        raise AdapterError(f"cannot keep the adapter's private copy under {folder} ({exc.strerror or exc}); "
                           "set TREEQA_CACHE_DIR to a folder you can write") from None
    return target


def _whole_number(value: Any) -> int:
    """A recorded size: an integer of JSON, not a float (1e400 reads as infinity) or a boolean."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"bytes must be a whole number of bytes, not {value!r}")
    return value


def _refuse_links(folder: Path, relative: Path) -> None:
    """An adapter is a file in the compiled file's folder, not a link to one elsewhere: a link is
    refused before anything is read through it (its target's size included)."""
    at = folder
    for part in relative.parts:
        at = at / part
        if at.is_symlink():
            raise AdapterError(f"adapter {folder / relative} is reached through a symbolic link ({at.name}); "
                               "copy the adapter beside the compiled file")


def recorded_adapter(recipe: dict[str, Any], folder: Path, where: str,
                     against_base: bool = True) -> tuple[Path, tuple[str, ...]] | None:
    """(verified adapter file, predictors) a compiled file's recipe records, or None; a missing
    or changed adapter, or one trained on other weights, is an AdapterError of one line.
    `against_base=False` (an endpoint serves the adapter, no local model loads it): its bytes
    are checked against the record, not its tensors against an embedded model's."""
    if "adapter" not in recipe:
        return None
    # late: the LM door (treeqa.lm) is read at call time, where tests replace its base hash (a circle too)
    from treeqa.lm import base_model_sha256

    ref = AdapterRef.from_dict(recipe["adapter"], where)
    path = ref.verified_path(Path(folder), base_model_sha256() if against_base else None)
    if not against_base:
        return path, ref.predictors
    try:
        check_adapter(path)  # the record proves only that this is the file that came with it
    except AdapterError as exc:  # named as the user knows it, and no refused copy kept
        path.unlink(missing_ok=True)
        raise AdapterError(str(exc).replace(str(path), str(Path(folder) / ref.file))) from None
    return path, ref.predictors


def attach(program, adapter: Path, predictors, cache: bool = True, where: str = "") -> None:
    """Give the named predictors of `program` the embedded model with `adapter` added (their own LM)."""
    # late: the LM door (treeqa.lm) is read at call time, where tests replace get_lm (a circle too)
    from treeqa.lm import get_lm

    named = dict(program.named_predictors())
    unknown = [p for p in predictors if p not in named]
    if unknown:
        raise AdapterError(f"{where}: the adapter is recorded for predictors the program lacks: {', '.join(unknown)}")
    lm = get_lm("local", adapter=adapter, cache=cache)
    for name in predictors:
        named[name].lm = lm
