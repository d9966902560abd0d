#!/usr/bin/env bash
# Issue 29: ALLIES where its paper measured it. On 100 seeded test questions of NQ (then
# TriviaQA and WebQ): direct, rta (top 5), genread, the zero-shot beam with the paper's preset
# for the set, and the beam compiled with its default compile, the path judge, trained on MuSiQue
# (`--train-from musique`: these sets have no annotations; MuSiQue's decompositions give Ask its
# demos, its gold paths fit the judge that ranks states; no LM call). `beam-reader` (Answer
# compiled on recorded reads of the dev split) is an extra step, not in the default list.
# TriviaQA and WebQ: the paper's presets (Table 6) give the beam GENREAD evidence, no retrieval, so
# there is nothing for a path judge to score; there `beam-compiled` is the `annotated` compile
# (Ask, Answer and Score demos from MuSiQue, no LM call). The extra steps `beam-retrieval` and
# `beam-retrieval-compiled` run the same preset with retrieved-and-summarised evidence instead
# (`--param evidence=retrieval`, N=2 passages as on NQ), zero-shot and with the path judge.
# Embedded model, --no-cache, one run at a time; every run appends per-question records, so
# running this again resumes where it stopped.
#   DATASET=nq N=100 bash benchmarks/allies_home.sh [step ...]
#   steps: direct rta genread beam beam-compiled record     (default: all, in this order)
#   extra steps: beam-reader; beam-retrieval, beam-retrieval-compiled; selfask (issue 26: Self-Ask on the same questions, the ALLIES paper's baseline);
#   beam-deep: the zero-shot beam with --param threshold=1.0, which Score (0.1/0.3/0.6/0.9) never
#   reaches, so every search runs all D rounds: does searching past one round pay?
#   vote: the finished beam, compiled beam and deep beam re-picked with pick=vote from their recorded trees
#   (benchmarks/repick.py, no LM call), each into <run>-vote
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
DATASET=${DATASET:-nq}
N=${N:-100}
TRAIN=${TRAIN:-100}
OUT=${OUT:-benchmarks/runs/$DATASET-test$N}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(direct rta genread beam beam-compiled record)
for step in "${steps[@]}"; do
    case "$step" in
        direct|genread|selfask)
            "$BIN/treeqa" evaluate --program "$step" --dataset "$DATASET" --n "$N" --no-cache --out "$OUT/$step" ;;
        rta)
            "$BIN/treeqa" evaluate --program rta --param k=5 --dataset "$DATASET" --n "$N" --no-cache --out "$OUT/rta" ;;
        beam)
            "$BIN/treeqa" evaluate --program beam --preset "$DATASET" --dataset "$DATASET" --n "$N" --no-cache \
                --out "$OUT/beam" ;;
        beam-compiled)
            case "$DATASET" in nq) compile=path-judge ;; *) compile=annotated ;; esac
            "$BIN/treeqa" optimize --program beam --preset "$DATASET" --dataset "$DATASET" --optimizer "$compile" \
                --train-from musique --train 100 --dev "$N" --no-cache --zero-shot-from "$OUT/beam" \
                --out "$OUT/beam-compiled" ;;
        beam-deep)
            "$BIN/treeqa" evaluate --program beam --preset "$DATASET" --param threshold=1.0 --dataset "$DATASET" \
                --n "$N" --no-cache --out "$OUT/beam-deep" ;;
        beam-retrieval)
            "$BIN/treeqa" evaluate --program beam --preset "$DATASET" --param evidence=retrieval --dataset "$DATASET" \
                --n "$N" --no-cache --out "$OUT/beam-retrieval" ;;
        beam-retrieval-compiled)
            "$BIN/treeqa" optimize --program beam --preset "$DATASET" --param evidence=retrieval --dataset "$DATASET" \
                --optimizer path-judge --train-from musique --train 100 --dev "$N" --no-cache \
                --zero-shot-from "$OUT/beam-retrieval" --out "$OUT/beam-retrieval-compiled" ;;
        beam-reader)
            "$BIN/treeqa" optimize --program beam --preset "$DATASET" --dataset "$DATASET" --optimizer reader \
                --train "$TRAIN" --dev "$N" --no-cache --zero-shot-from "$OUT/beam" --out "$OUT/beam-reader" ;;
        vote)
            for run in beam beam-compiled beam-deep; do
                src="$OUT/$run"; [ -f "$src/report.json" ] && src="$src/compiled"
                [ -f "$src/summary.json" ] && [ ! -e "$OUT/$run-vote" ] && "$BIN/python" benchmarks/repick.py "$src" "$OUT/$run-vote"
            done ;;
        record)
            runs=()  # a table still being filled: record the finished runs, pair what exists
            for run in direct rta genread beam beam-compiled beam-reader selfask beam-retrieval \
                       beam-retrieval-compiled beam-vote beam-compiled-vote beam-deep beam-deep-vote; do
                [ -f "$OUT/$run/summary.json" ] || [ -f "$OUT/$run/report.json" ] && runs+=("$OUT/$run"); done
            "$BIN/python" benchmarks/record.py "$DATASET-test$N" "${runs[@]}" \
                --pair beam:rta --pair beam:genread --pair beam:direct --pair genread:direct --pair genread:rta --pair rta:direct --pair beam-compiled:beam \
                --pair beam-compiled:rta --pair beam-compiled:genread --pair beam-reader:beam --pair beam-reader:rta \
                --pair selfask:rta --pair selfask:direct --pair beam:selfask \
                --pair beam-retrieval:rta --pair beam-retrieval:beam --pair beam-retrieval-compiled:beam-retrieval \
                --pair beam-retrieval-compiled:rta --pair beam-vote:beam --pair beam-compiled-vote:beam-compiled \
                --pair beam-vote:rta --pair beam-compiled-vote:rta --pair beam-vote:genread \
                --pair beam-compiled-vote:genread --pair beam-compiled-vote:beam-vote \
                --pair beam-deep:beam --pair beam-deep:rta --pair beam-deep-vote:beam-deep --pair beam-deep-vote:rta \
                --note "${NOTE:-Issue 29: direct, rta (k=5), genread, the zero-shot beam (preset $DATASET) and the beam compiled from 100 MuSiQue train questions (NQ: the path judge and annotated demos; TriviaQA and WebQ, whose presets read GENREAD documents and no passages: the annotated demos) on the same $N seeded $DATASET test questions (seed 0), embedded model, 2 cores, --no-cache, dense retrieval over the Wikipedia leads plus the NQ-open test gold passages (one corpus for the three sets); runs one at a time.}" ;;
        *) echo "unknown step $step" >&2; exit 2 ;;
    esac
done
