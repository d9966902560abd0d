"""How many cores other processes keep busy, read from Linux's /proc between two engine calls.

The embedded engine decodes one token at a time with its threads meeting at a barrier after
every operation; beside a busy process that holds a core, a thread waits there for a partner the
scheduler has parked, and generation fell to a third of its speed (11 against 34 tokens a second,
`benchmarks/engine_under_load.md`). Generating on the cores the others leave idle keeps it at
24. Where /proc is not there (macOS, Windows), nothing is read and nothing adapts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (idle and iowait are not busy)


class CpuShare:
    """`others_busy()`: cores kept busy by other processes since the previous reading."""

    def __init__(self, stat: Path = Path("/proc/stat"), own: Path = Path("/proc/self/stat"),
                 clock: Callable[[], float] = time.monotonic, ticks_per_s: float | None = None):
        self.stat, self.own, self.clock = stat, own, clock
        if ticks_per_s is None:
            ticks_per_s = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self.ticks_per_s = ticks_per_s
        self._last = self._read()

    def _read(self) -> tuple[float, float, float] | None:
        """(wall seconds, busy ticks of the machine, ticks of this process), or None without /proc."""
        try:
            machine = self.stat.read_text().split("\n", 1)[0].split()[1:]
            own = self.own.read_text().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            busy = sum(float(machine[i]) for i in _BUSY_FIELDS if i < len(machine))
            return self.clock(), busy, float(own[11]) + float(own[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            return None

    def others_busy(self, min_window: float = 0.25) -> float | None:
        """Cores other processes used since the previous reading, or None where /proc cannot be
        read or less than `min_window` seconds passed (too few clock ticks to tell; the window
        then grows to the next call). Between engine calls the window is the last call."""
        now = self._read()
        if now is None or self._last is None:
            self._last = now
            return None
        seconds = now[0] - self._last[0]
        if seconds < min_window:
            return None
        last, self._last = self._last, now
        others = (now[1] - last[1]) - (now[2] - last[2])
        return max(0.0, others / self.ticks_per_s / seconds)


def generation_threads(threads: int, others_busy: float, cores: int | None = None) -> int:
    """Threads to generate with: `threads`, less the cores other processes keep busy (at least one)."""
    free = (cores or os.cpu_count() or threads) - int(others_busy + 0.5)
    return max(1, min(threads, free))
