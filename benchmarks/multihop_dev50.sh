#!/usr/bin/env bash
# Issue 11's second multi-hop set: rta, zero-shot ToR and ToR compiled with --optimizer
# path-judge (fitted on 100 train questions' annotated paths) on the same 50 seeded dev
# questions, embedded model, --no-cache, one run at a time. Resumable like hotpotqa_dev100.sh.
#   DATASET=2wikimultihopqa bash benchmarks/multihop_dev50.sh [step ...]
#   steps: rta tor tor-path-judge record        (default: all, in this order)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
DATASET=${DATASET:-2wikimultihopqa}
N=${N:-50}
OUT=${OUT:-benchmarks/runs/$DATASET-dev$N}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(rta tor tor-path-judge record)
for step in "${steps[@]}"; do
    case "$step" in
        rta|tor)
            "$BIN/treeqa" evaluate --program "$step" --dataset "$DATASET" --n "$N" --no-cache --out "$OUT/$step" ;;
        tor-path-judge)
            "$BIN/treeqa" optimize --program tor --dataset "$DATASET" --optimizer path-judge \
                --train 100 --dev "$N" --no-cache --zero-shot-from "$OUT/tor" --out "$OUT/tor-path-judge" ;;
        record)
            "$BIN/python" benchmarks/record.py "$DATASET-dev$N" "$OUT/rta" "$OUT/tor" "$OUT/tor-path-judge" \
                --pair tor-path-judge:tor --pair tor-path-judge:rta --pair tor:rta \
                --note "${NOTE:-Issue 11: rta, zero-shot ToR and ToR compiled with --optimizer path-judge on the same $N seeded $DATASET dev questions (seed 0), embedded model, 2 cores, --no-cache, dense retrieval over the pooled $DATASET corpus; runs one at a time.}" ;;
        *) echo "unknown step $step" >&2; exit 2 ;;
    esac
done
