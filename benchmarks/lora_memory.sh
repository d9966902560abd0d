#!/usr/bin/env bash
# Resident memory of a LoRA training over time (benchmarks/lora_memory.md): `train lora` on the
# first N reads of a reader set (hashed order), its VmRSS sampled every 5 s, then one row: the
# peak (VmHWM), the mean of the last quarter of the samples (the last one, at exit, left out), and
# the training's seconds. Run it once first to fill the layer cache, then the runs compared, alone.
#   NAME=as-is bash benchmarks/lora_memory.sh        (more env: SET, N, WORK; any MALLOC_* passes through)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
SET=${SET:-.cache/reader-sets/v5}
N=${N:-40}
NAME=${NAME:-as-is}
WORK=${WORK:-.cache/lora/memory}
dir=$WORK/$NAME
rm -rf "$dir" && mkdir -p "$dir"
"$BIN/python" -m treeqa.cli train lora --set "$SET" --out "$dir" --per-question 1 --yes-no-built --limit "$N" \
  --top-dtype auto --validate-every 8 --validation-reads 16 > "$dir/train.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  awk '/VmHWM|VmRSS/ {printf "%s ", $2} END {print ""}' "/proc/$pid/status" >> "$dir/rss.txt" 2>/dev/null || true
  sleep 5
done
wait "$pid"
"$BIN/python" - "$dir" "$NAME" <<'PY'
import json, sys
from pathlib import Path
folder, name = Path(sys.argv[1]), sys.argv[2]
rows = [line.split() for line in (folder / "rss.txt").read_text().splitlines() if len(line.split()) == 2]
gib = [int(rss) / 2**20 for _, rss in rows]
report = json.loads((folder / "training.json").read_text())["report"]
tail = gib[-max(1, len(gib) // 4) - 1:-1] or gib
print("| run | examples | peak GiB (VmHWM) | last-quarter mean GiB | s in all | s training |")
print(f"| {name} | {report['examples']} | {max(int(h) for h, _ in rows) / 2**20:.2f} | "
      f"{sum(tail) / len(tail):.2f} | {report['seconds']} | {report['seconds_training']} |")
PY
