"""An adapter is compared with the base model before llama.cpp reads it.

llama.cpp trusts an adapter's tensors: a file cut short, or one shaped for another model, loads
and then the first decode reads past its buffers (SIGSEGV, exit 139). A compiled file's record
(size, sha256) only proves that the adapter is the file that came with it. So every adapter is
read here with gguf's pure-Python reader and compared with what the base GGUF's own header
implies (its architecture, its layers, each projection's in and out widths): anything else is
one AdapterError line, before the engine sees the file.
"""

from __future__ import annotations

import math
import mmap
import re
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from treeqa.lm._weights import model_path

# Hugging Face projection names -> llama.cpp's tensor names (Qwen2 / Llama layout): the weights a
# LoRA adapter may adapt
GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


class AdapterError(ValueError):
    """An adapter that is missing, changed since it was recorded, or not one llama.cpp reads."""


_LORA_NAME = re.compile(r"blk\.(\d{1,4})\.(" + "|".join(GGUF_NAMES.values()) + r")\.weight\.lora_([ab])")
MAX_KV = 64  # our adapters carry 5 keys; bounds the pure-Python read of a hostile header
_HEADER = struct.Struct("<4sIQQ")  # magic, version, tensor count, key-value count


@dataclass(frozen=True)
class BaseTargets:
    """What an adapter of a base model may hold: its architecture and, for each weight a LoRA can
    adapt (`blk.N.attn_q.weight`, ...), its (in, out) widths in ggml's order."""

    architecture: str
    shapes: dict[str, tuple[int, int]]


_bases: dict[tuple, BaseTargets] = {}
_bases_lock = threading.Lock()


def base_targets(base: Path) -> BaseTargets:
    """The base model's LoRA targets, read once per file (keyed by path, size and time)."""
    stat = Path(base).stat()
    key = (str(Path(base).resolve()), stat.st_size, stat.st_mtime_ns)
    with _bases_lock:
        if key not in _bases:
            _bases[key] = _read_base(Path(base))
        return _bases[key]


def _read_base(base: Path) -> BaseTargets:
    try:
        arch, tensors = _skim_header(base)
    except (ValueError, KeyError, struct.error, UnicodeDecodeError) as exc:
        raise AdapterError(f"base model {base} is not a GGUF file ({type(exc).__name__}: {exc})") from None
    shapes = {name: (dims[0], dims[1]) for name, dims in tensors.items()
              if len(dims) == 2 and _LORA_NAME.fullmatch(f"{name}.lora_a")}
    if not arch or not shapes:
        raise AdapterError(f"base model {base}: no architecture or no weights a LoRA adapter can adapt")
    return BaseTargets(arch, shapes)


# GGUF value types -> their size in bytes (8 is a string, 9 an array)
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _skim_header(base: Path) -> tuple[str | None, dict[str, tuple[int, ...]]]:
    """(general.architecture, tensor name -> dims) of a GGUF, skipping every other value: gguf's
    reader parses the base's tokenizer (150,000 strings) in Python, 17 s on a busy 2-core
    machine, where this takes a fraction of a second."""
    with open(base, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        magic, _, n_tensors, n_kv = _HEADER.unpack_from(data, 0)
        if magic != b"GGUF":
            raise ValueError("no GGUF magic")
        at, arch = _HEADER.size, None

        def text(at: int) -> tuple[str, int]:
            (n,) = struct.unpack_from("<Q", data, at)
            return bytes(data[at + 8:at + 8 + n]).decode("utf-8"), at + 8 + n

        def skip(kind: int, at: int) -> int:
            if kind == 8:
                return at + 8 + struct.unpack_from("<Q", data, at)[0]
            if kind == 9:
                item, count = struct.unpack_from("<IQ", data, at)
                at += 12
                if item in _SIZES:
                    return at + count * _SIZES[item]
                for _ in range(count):
                    at = skip(item, at)
                return at
            return at + _SIZES[kind]

        for _ in range(n_kv):
            key, at = text(at)
            (kind,) = struct.unpack_from("<I", data, at)
            if key == "general.architecture" and kind == 8:
                arch, at = text(at + 4)
            else:
                at = skip(kind, at + 4)
        tensors = {}
        for _ in range(n_tensors):
            name, at = text(at)
            (n_dims,) = struct.unpack_from("<I", data, at)
            tensors[name] = struct.unpack_from(f"<{n_dims}Q", data, at + 4)
            at += 4 + 8 * n_dims + 12  # the dims, then the type (u32) and the offset (u64)
    return arch, tensors


def check_adapter(path: str | Path, base: str | Path | None = None) -> None:
    """Refuse, in one AdapterError line, an adapter llama.cpp could not safely add to `base` (by
    default the embedded model): not a whole GGUF LoRA file, another architecture, a tensor the
    base lacks, a type other than F32/F16, a lora_a without its lora_b, or widths and ranks that
    do not fit the base weight they adapt."""
    path = Path(path)
    targets = base_targets(Path(base) if base is not None else model_path())
    size = _checked_header(path, len(targets.shapes))
    reader = _read(path)
    _check_metadata(reader, targets, path)
    pairs = _check_tensors(reader, targets, path, size)
    if not pairs:
        raise AdapterError(f"adapter {path} holds no LoRA weights")


def _checked_header(path: Path, targets: int) -> int:
    """The file's size, once its fixed header is a GGUF's with counts a LoRA of this base can have
    (read before gguf's reader, which parses every key and tensor entry in Python)."""
    if not path.is_file():  # a FIFO or a folder (a compiled file's record refuses links before this)
        raise AdapterError(f"adapter {path} is not a regular file")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(_HEADER.size)
    if len(head) < _HEADER.size or head[:4] != b"GGUF":
        raise AdapterError(f"adapter {path} is not a GGUF file")
    _, _, tensors, kvs = _HEADER.unpack(head)
    if tensors > 2 * targets or kvs > MAX_KV:
        raise AdapterError(f"adapter {path} lists {tensors:,} tensors and {kvs:,} keys; a LoRA adapter of this "
                           f"model has at most {2 * targets:,} and {MAX_KV}")
    return size


def _read(path: Path):
    import gguf  # ~0.1 s: loaded when an adapter is checked, not with treeqa.lm

    try:
        return gguf.GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure means the same: not a whole GGUF file
        raise AdapterError(f"adapter {path} is not a whole GGUF file: cut short or damaged "
                           f"({type(exc).__name__}: {exc})") from None


def _text_field(reader, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None:
        return None
    value = field.contents()
    return value if isinstance(value, str) else None


def _check_metadata(reader, targets: BaseTargets, path: Path) -> None:
    if _text_field(reader, "general.type") != "adapter" or _text_field(reader, "adapter.type") != "lora":
        raise AdapterError(f"adapter {path} is not a LoRA adapter (general.type and adapter.type must say "
                           "'adapter' and 'lora')")
    arch = _text_field(reader, "general.architecture")
    if arch != targets.architecture:
        raise AdapterError(f"adapter {path} is for architecture {arch!r}; the base model is {targets.architecture!r}")
    alpha = reader.fields.get("adapter.lora.alpha")
    value = alpha.contents() if alpha is not None else None
    if not isinstance(value, float) or not math.isfinite(value) or value <= 0:
        raise AdapterError(f"adapter {path}: adapter.lora.alpha must be a positive finite number, not {value!r}")


def _check_tensors(reader, targets: BaseTargets, path: Path, size: int) -> dict[str, dict[str, tuple]]:
    """Weight name -> {"a": shape, "b": shape}, once every tensor fits the base and the file."""
    import gguf  # ~0.1 s: loaded when an adapter is checked

    pairs: dict[str, dict[str, tuple]] = {}
    for tensor in reader.tensors:
        match = _LORA_NAME.fullmatch(tensor.name)
        weight = tensor.name.rsplit(".", 1)[0]
        if match is None or weight not in targets.shapes:
            raise AdapterError(f"adapter {path}: tensor {tensor.name[:80]!r} adapts no weight of the base model")
        if tensor.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            raise AdapterError(f"adapter {path}: tensor {tensor.name} is {tensor.tensor_type.name}; "
                               "an adapter holds F32 or F16")
        if tensor.data_offset % reader.alignment or tensor.data_offset + tensor.n_bytes > size:
            raise AdapterError(f"adapter {path} is cut short or misaligned: tensor {tensor.name} lies outside "
                               f"its {size:,} bytes")
        pairs.setdefault(weight, {})[match.group(3)] = tuple(int(d) for d in tensor.shape)
    for weight, pair in pairs.items():
        _check_pair(weight, pair, targets.shapes[weight], path)
    return pairs


def _check_pair(weight: str, pair: dict[str, tuple], base: tuple[int, int], path: Path) -> None:
    """lora_a is (in, rank) and lora_b (rank, out) in ggml's order, for the base's (in, out)."""
    if set(pair) != {"a", "b"}:
        raise AdapterError(f"adapter {path}: {weight} has lora_{''.join(pair)} without its pair")
    a, b = pair["a"], pair["b"]
    n_in, n_out = base
    if len(a) != 2 or len(b) != 2 or a[0] != n_in or b[1] != n_out:
        raise AdapterError(f"adapter {path}: {weight} is {n_in} in and {n_out} out in the base model; "
                           f"its lora_a is {a} and lora_b {b}")
    if a[1] != b[0] or not 1 <= a[1] <= min(n_in, n_out):
        raise AdapterError(f"adapter {path}: {weight}'s ranks differ or do not fit (lora_a {a}, lora_b {b})")
