#!/usr/bin/env bash
# Issue 26: the papers' baselines (Self-Ask, IRCoT, ITER-RETGEN, ReAct, DSPy's multi-hop Hop)
# zero-shot on the reference table's 100 seeded HotpotQA dev questions, each paired with rta
# and with ToR compiled with the path judge (runs/hotpotqa-dev100/{rta,tor-path-judge}), embedded
# model, --no-cache, one run at a time. Each run appends per-question records to
# benchmarks/runs/hotpotqa-dev100/<program>/, so running this again resumes where it stopped.
#   bash benchmarks/baselines_dev100.sh [program ...]   (default: all five, cheapest first)
# `hop-compiled` and `react-compiled` (not in the default list) compile those two with the
# cheapest EM teleprompter, BootstrapFewShot on TRAIN (default 20) HotpotQA train questions (at
# most 100 LM calls), and evaluate them on the same 100, paired with their zero-shot runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=${OUT:-benchmarks/runs/hotpotqa-dev100}
ALL=(iterretgen hop ircot selfask react)
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=("${ALL[@]}")
TRAIN=${TRAIN:-20}
for program in "${programs[@]}"; do
    case "$program" in
        *-compiled)
            base=${program%-compiled}
            "$BIN/treeqa" optimize --program "$base" --dataset hotpotqa --optimizer bootstrap --train "$TRAIN" \
                --dev 100 --no-cache --zero-shot-from "$OUT/$base" --out "$OUT/$program" ;;
        *)
            "$BIN/treeqa" evaluate --program "$program" --dataset hotpotqa --n 100 --no-cache --out "$OUT/$program" ;;
    esac
done
runs=("$OUT/rta" "$OUT/tor-path-judge")
pairs=()
for program in "${ALL[@]}"; do
    if [ -f "$OUT/$program/summary.json" ]; then
        runs+=("$OUT/$program")
        pairs+=(--pair "$program:rta" --pair "tor-path-judge:$program")
    fi
done
# the run before ITER-RETGEN's answer-only retry, and direct for Self-Ask (ALLIES' Table 1 pairs them)
for extra in iterretgen-no-retry:iterretgen direct:selfask; do
    run=${extra%%:*} program=${extra#*:}
    if [ -f "$OUT/$run/summary.json" ] && [ -f "$OUT/$program/summary.json" ]; then
        runs+=("$OUT/$run")
        pairs+=(--pair "$program:$run")
    fi
done
for program in hop react; do
    if [ -f "$OUT/$program-compiled/report.json" ]; then
        runs+=("$OUT/$program-compiled")
        pairs+=(--pair "$program-compiled:$program" --pair "$program-compiled:rta")
    fi
done
"$BIN/python" benchmarks/record.py hotpotqa-dev100-baselines "${runs[@]}" "${pairs[@]}" \
    --note "${NOTE:-The papers' baselines zero-shot on the reference table's 100 seeded HotpotQA dev questions (seed 0; a development set for the compiled ToR, not for these programs), each paired with rta and with ToR compiled with the path judge (and Hop and ReAct compiled with BootstrapFewShot on $TRAIN train questions, paired with their zero-shot runs); embedded model, 2 cores, --no-cache, dense retrieval over the pooled HotpotQA corpus; runs one at a time.}"
