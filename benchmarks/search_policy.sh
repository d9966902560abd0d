#!/usr/bin/env bash
# Issue 11's runs on the reference table's 100 HotpotQA dev questions (resumable: a run
# resumes its folder; records under benchmarks/runs/hotpotqa-dev100/). Kept as a script: its
# tor-hops2, tor-judge and tor-settings runs are in no YAML, so `benchmarks/run.py` cannot rerun them.
#   tor-hops2      zero-shot ToR that accepts only two-paragraph paths
#   tor-judge      the same, compiled with --optimizer judge (annotated demos + a relevance
#                  threshold fitted on 20 train questions); its zero-shot side is tor-hops2
#   tor-path-judge --optimizer path-judge: annotated demos and a judge fitted on all 100 train
#                  questions' annotated paths decide relevance and sufficiency (no LM verdict);
#                  its zero-shot side is the reference tor run
#   tor-settings   --optimizer settings (ToR's settings space, read_top included, searched on train);
#                  its zero-shot side is the reference tor run
#   beam-path-judge the beam (nq preset) compiled with --optimizer path-judge: the judge's
#                  probability that a state's passages hold what the question needs replaces
#                  Score; its zero-shot side is the reference beam run
#   bash benchmarks/search_policy.sh [step ...]     (default: all five, in this order)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=${OUT:-benchmarks/runs/hotpotqa-dev100}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tor-path-judge tor-hops2 tor-judge tor-settings beam-path-judge)
for step in "${steps[@]}"; do
    case "$step" in
        tor-hops2)
            "$BIN/treeqa" evaluate --program tor --param hops=2 --dataset hotpotqa --n 100 --no-cache \
                --out "$OUT/tor-hops2" ;;
        tor-judge)
            "$BIN/treeqa" optimize --program tor --param hops=2 --dataset hotpotqa --optimizer judge \
                --train 20 --dev 100 --no-cache --zero-shot-from "$OUT/tor-hops2" --out "$OUT/tor-judge" ;;
        tor-path-judge)
            "$BIN/treeqa" optimize --program tor --dataset hotpotqa --optimizer path-judge \
                --train 100 --dev 100 --no-cache --zero-shot-from "$OUT/tor" --out "$OUT/tor-path-judge" ;;
        tor-settings)
            "$BIN/treeqa" optimize --program tor --dataset hotpotqa --optimizer settings --candidates 3 \
                --train 20 --dev 100 --no-cache --zero-shot-from "$OUT/tor" --out "$OUT/tor-settings" ;;
        beam-path-judge)
            "$BIN/treeqa" optimize --program beam --preset nq --dataset hotpotqa --optimizer path-judge \
                --train 100 --dev 100 --no-cache --zero-shot-from "$OUT/beam" --out "$OUT/beam-path-judge" ;;
        *) echo "unknown step $step" >&2; exit 2 ;;
    esac
done
