#!/usr/bin/env bash
# rta with a LoRA reader trained on gold reads (docs/finetune.md), run by steps; each resumes.
#   bash benchmarks/lora_reader.sh [step ...]
#   train     300 gold reads (HotpotQA train 100 and the 100 reference dev questions, 2Wiki's
#             50 reference dev and first 50 train questions), LoRA r16 on the top 8 layers, one
#             epoch; resumes OUT/checkpoint.pt (commit it to move a training between machines)
#   export    the adapter as the checkpoint holds it (a training stopped early or still running),
#             and rta compiled with it for HotpotQA and 2Wiki
#   dev       the development comparison: rta and rta with the adapter on 2Wiki train questions
#             51-150 of the seeded order (the first 50 are trained on): never used for a claim;
#             LABEL names the adapter's run (default rta-lora)
#   hotpotqa  rta with the adapter on the 197 unexamined HotpotQA dev questions (skip 100), paired
#             with the committed rta run (python benchmarks/run.py hotpotqa-dev-unexamined-skip100-n197)
#   2wiki     the same on the 100 unexamined 2Wiki dev questions (skip 50)
#   fresh     the claim sample for the balanced adapter: 2Wiki train questions 151-350 of the seeded
#             order (never trained on, never examined: the first 50 were trained on, 51-150 are the
#             development sample), rta, rta with the first adapter and with the balanced one
#   tor-fresh the best compiled 2Wiki ToR (path judge, read_top 3, the reader compiled on recorded
#             reads) without and with the balanced adapter on its fusion reader (treeqa train attach), on the
#             first 100 of the fresh sample, the two side by side (so a cut leaves a balanced pair)
#   tor-replay the best compiled ToR of each unexamined dev sample re-reading its recorded searches
#             (treeqa replay) with the balanced adapter on its fusion reader, and, for 2Wiki, without it
#             (HotpotQA's replay without it is tor-path-judge-replay of that sample's YAML): the
#             pair differs in the reader's weights alone (a live run with the adapter searches
#             differently: NOTES.md of the fresh sample)
#   balanced-unexamined  rta with the balanced adapter on the 197 HotpotQA and 100 2Wiki unexamined
#             dev questions (LABEL rta-lora-balanced)
#   record    the YAMLs (record-fresh: the fresh sample's)
#   train-balanced  the same training on the same reads with as many gold "yes" as "no" (the first
#             adapter learned a "no" prior from 35 against 10: NOTES.md), into OUT=BALANCED
#             (default benchmarks/runs/lora-reader-rta-balanced); export-balanced likewise
# Embedded model, --no-cache, one run at a time (a training beside an evaluation halves both).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=${OUT:-benchmarks/runs/lora-reader-rta}
DEV=benchmarks/runs/2wikimultihopqa-train-dev-skip50-n100
steps=("$@")
record_fresh() {  # the fresh sample's YAML: every finished run, the pairs that exist
    local fresh=benchmarks/runs/2wikimultihopqa-train-unexamined-skip150-n200 runs=() run
    local tor=tor-path-judge-read-3-reader
    for run in "$fresh"/*/; do [ -f "$run/summary.json" ] && runs+=("${run%/}"); done
    "$BIN/python" benchmarks/record.py 2wikimultihopqa-train-unexamined-skip150-n200 "${runs[@]}" \
        --pair rta-lora-balanced:rta --pair rta-lora:rta --pair rta-lora-balanced:rta-lora \
        --pair "$tor-lora-balanced:$tor" --pair "$tor:rta" --pair "$tor-lora-balanced:rta" \
        --pair "$tor-lora-balanced:rta-lora-balanced" \
        --note "${NOTE:-rta, rta with the first LoRA reader and with the yes/no-balanced one (benchmarks/lora_reader.sh) on 2Wiki train questions 151-350 of the seeded order (seed 0): never trained on and never examined; embedded model, 2 cores, --no-cache, one run at a time.}"
}
[ ${#steps[@]} -gt 0 ] || steps=(train export dev hotpotqa 2wiki record)
for step in "${steps[@]}"; do
    case "$step" in
        train|train-balanced|export|export-balanced)
            # the first adapters were trained by benchmarks/train_reader.py, retired when the reader's
            # training became a library (treeqa/train/); it is in the history as it ran
            echo "$step: the script that trained these adapters is retired; read it with" \
                 "'git show c6705fb:benchmarks/train_reader.py', or train the reader today with" \
                 "'treeqa train reader --out DIR' (docs/finetune.md)" >&2
            exit 2 ;;
        fresh)
            fresh=benchmarks/runs/2wikimultihopqa-train-unexamined-skip150-n200
            balanced=${BALANCED:-benchmarks/runs/lora-reader-rta-balanced}
            "$BIN/treeqa" evaluate --program rta --dataset 2wikimultihopqa --split train --skip 150 --n 200 \
                --no-cache --out "$fresh/rta"
            "$BIN/treeqa" evaluate --compiled "$balanced/compiled-2wikimultihopqa.json" --dataset 2wikimultihopqa \
                --split train --skip 150 --n 200 --no-cache --out "$fresh/rta-lora-balanced"
            "$BIN/treeqa" evaluate --compiled "$OUT/compiled-2wikimultihopqa.json" --dataset 2wikimultihopqa \
                --split train --skip 150 --n 200 --no-cache --out "$fresh/rta-lora"
            record_fresh ;;
        record-fresh) record_fresh ;;
        tor-fresh)
            fresh=benchmarks/runs/2wikimultihopqa-train-unexamined-skip150-n200
            balanced=${BALANCED:-benchmarks/runs/lora-reader-rta-balanced}
            tor=benchmarks/runs/2wikimultihopqa-dev-unexamined-skip50-n100/tor-path-judge-read-3-reader/compiled.json
            [ -f "$balanced/compiled-tor-2wikimultihopqa.json" ] ||
                "$BIN/treeqa" train attach "$tor" "$balanced/adapter-f451c1c679e9.gguf" \
                    "$balanced/compiled-tor-2wikimultihopqa.json" --predictor fuse
            "$BIN/treeqa" evaluate --compiled "$tor" --dataset 2wikimultihopqa --split train --skip 150 --n 100 \
                --no-cache --out "$fresh/tor-path-judge-read-3-reader" &
            "$BIN/treeqa" evaluate --compiled "$balanced/compiled-tor-2wikimultihopqa.json" --dataset 2wikimultihopqa \
                --split train --skip 150 --n 100 --no-cache --out "$fresh/tor-path-judge-read-3-reader-lora-balanced" &
            wait ;;
        tor-replay)
            balanced=${BALANCED:-benchmarks/runs/lora-reader-rta-balanced}
            hotpot=benchmarks/runs/hotpotqa-dev-unexamined-skip100-n197
            wiki=benchmarks/runs/2wikimultihopqa-dev-unexamined-skip50-n100
            reading=benchmarks/runs/hotpotqa-train40-reading
            [ -f "$balanced/compiled-tor-hotpotqa.json" ] ||
                "$BIN/treeqa" train attach "$reading/compile-none/compiled.json" \
                    "$balanced/adapter-f451c1c679e9.gguf" "$balanced/compiled-tor-hotpotqa.json" --predictor fuse
            "$BIN/treeqa" replay "$hotpot/tor-path-judge-read-3" --compiled "$balanced/compiled-tor-hotpotqa.json" \
                --source-compiled "$reading/compile-3/compiled.json" --no-cache \
                --out "$hotpot/tor-path-judge-replay-lora-balanced"
            tor=$wiki/tor-path-judge-read-3-reader
            "$BIN/treeqa" replay "$tor/compiled" --compiled "$tor/compiled.json" --no-cache --out "$tor-replay"
            "$BIN/treeqa" replay "$tor/compiled" --compiled "$balanced/compiled-tor-2wikimultihopqa.json" \
                --source-compiled "$tor/compiled.json" --no-cache --out "$tor-replay-lora-balanced" ;;
        balanced-unexamined)
            balanced=${BALANCED:-benchmarks/runs/lora-reader-rta-balanced}
            "$BIN/treeqa" evaluate --compiled "$balanced/compiled-hotpotqa.json" --dataset hotpotqa --skip 100 --n 197 \
                --no-cache --out "benchmarks/runs/hotpotqa-dev-unexamined-skip100-n197/${LABEL:-rta-lora-balanced}"
            "$BIN/treeqa" evaluate --compiled "$balanced/compiled-2wikimultihopqa.json" --dataset 2wikimultihopqa \
                --skip 50 --n 100 --no-cache \
                --out "benchmarks/runs/2wikimultihopqa-dev-unexamined-skip50-n100/${LABEL:-rta-lora-balanced}" ;;
        dev)
            "$BIN/treeqa" evaluate --program rta --dataset 2wikimultihopqa --split train --skip 50 --n 100 \
                --no-cache --out "$DEV/rta"
            "$BIN/treeqa" evaluate --compiled "$OUT/compiled-2wikimultihopqa.json" --dataset 2wikimultihopqa \
                --split train --skip 50 --n 100 --no-cache --out "$DEV/${LABEL:-rta-lora}" ;;
        hotpotqa)
            "$BIN/treeqa" evaluate --compiled "$OUT/compiled-hotpotqa.json" --dataset hotpotqa --skip 100 --n 197 \
                --no-cache --out "benchmarks/runs/hotpotqa-dev-unexamined-skip100-n197/${LABEL:-rta-lora}" ;;
        2wiki)
            "$BIN/treeqa" evaluate --compiled "$OUT/compiled-2wikimultihopqa.json" --dataset 2wikimultihopqa \
                --skip 50 --n 100 --no-cache \
                --out "benchmarks/runs/2wikimultihopqa-dev-unexamined-skip50-n100/${LABEL:-rta-lora}" ;;
        record)
            runs=()
            for run in "$DEV"/*/; do [ -f "$run/summary.json" ] && runs+=("${run%/}"); done
            "$BIN/python" benchmarks/record.py 2wikimultihopqa-train-dev-skip50-n100 "${runs[@]}" \
                --pair "${LABEL:-rta-lora}:rta" \
                --note "${NOTE:-rta and rta with a LoRA reader (benchmarks/lora_reader.sh) on 2Wiki train questions 51-150 of the seeded order (seed 0), a development sample: never trained on, never claimed on; embedded model, 2 cores, --no-cache, one run at a time.}" ;;
        *) echo "unknown step $step" >&2; exit 2 ;;
    esac
done
