"""The machine a run ran on, recorded in every summary: a ratio of two runs' seconds means
something only when both sides come from one machine, and the engine's speed differs 2x between
the CPUs this project runs on (prompt reading 43-53 tok/s on an AVX2-only EPYC, 95-99 on an AMX Xeon)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

# the CPU features that decide llama.cpp's and torch's speed here
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_int8", "amx_bf16")


def machine(cpuinfo: str | None = None, engine_threads: int | None = None) -> dict:
    """CPU model, the flags among FLAGS it has, cores, and the embedded engine's threads."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    out = {"cpu": fields.get("model name") or platform.processor() or platform.machine(),
           "flags": [f for f in FLAGS if f in flags], "cores": os.cpu_count()}
    if engine_threads is not None:
        out["engine_threads"] = engine_threads
    return out
