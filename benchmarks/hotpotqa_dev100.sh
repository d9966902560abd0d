#!/usr/bin/env bash
# The reference table: six programs on the same 100 seeded HotpotQA dev questions, embedded
# model, no response cache, one run at a time. Each run appends to
# benchmarks/runs/hotpotqa-dev100/<program>/predictions.jsonl as questions finish, so
# running this again (on any machine, after a git pull) resumes where it stopped.
#   bash benchmarks/hotpotqa_dev100.sh [program ...]     (default: all six, cheapest first)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=${OUT:-benchmarks/runs/hotpotqa-dev100}
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(direct cot rta cor tor beam)
for program in "${programs[@]}"; do
    preset=()
    [ "$program" = beam ] && preset=(--preset nq)
    "$BIN/treeqa" evaluate --program "$program" "${preset[@]}" --dataset hotpotqa --n 100 --no-cache \
        --out "$OUT/$program"
done
runs=()
for program in direct cot rta cor tor beam; do
    [ -f "$OUT/$program/summary.json" ] && runs+=("$OUT/$program")
done
"$BIN/python" benchmarks/record.py hotpotqa-dev100 "${runs[@]}" \
    --pair tor:cor --pair tor:rta --pair beam:rta --pair cor:rta --pair rta:direct --pair cot:direct \
    --note "${NOTE:-Six programs on the same 100 seeded HotpotQA dev questions (seed 0), embedded model, 2 cores, --no-cache, dense retrieval over the pooled HotpotQA corpus; runs one at a time.}"
