#!/usr/bin/env bash
# The released reader (treeqa/train/released/), by steps; each resumes.
#   bash benchmarks/released_reader.sh [step ...]
#   train    `treeqa train reader` from a frozen checkout (COMMIT, a git worktree in WORKTREE), into
#            RUN (.cache/released-reader/v1): the reads of every question we may train on, the LoRA
#            reader, reader.json; about 1.5 hours on 2 cores, alone
#   score    validation EM of rta's reader through the adapter on the 118 validation reads (one a
#            question), into benchmarks/runs/released-reader/val-scores.jsonl, paired with the base
#            reader's scores of the same reads (benchmarks/runs/lora-recipes/base/val-scores.jsonl)
#   release  the adapter and its record (with the validation figures) into treeqa/train/released/
#   yes-no   the released adapter's yes/no calibration (`treeqa train yes-no`) on the validation reads
#            of yes/no questions, into benchmarks/runs/released-reader/yes-no/, then into the released
#            record (`yes_no`); the reads are rebuilt in RUN/reads if missing (the same sha256)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
COMMIT=${COMMIT:-c6705fb}
WORKTREE=${WORKTREE:-../frozen-reader}
RUN=${RUN:-.cache/released-reader/v1}
OUT=benchmarks/runs/released-reader
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(train score release)
for step in "${steps[@]}"; do
    case "$step" in
        train)
            [ -d "$WORKTREE" ] || git worktree add "$WORKTREE" "$COMMIT"
            here=$(pwd)
            (cd "$WORKTREE" && PYTHONPATH="$PWD" TREEQA_CACHE_DIR="$here/.cache" \
                "$here/$BIN/python" -m treeqa.cli train reader --out "$here/$RUN") ;;
        score)
            mkdir -p "$OUT"
            # rta with the adapter, beside the training (not committed: the adapter is released below)
            [ -f "$RUN/compiled-rta.json" ] ||
                "$BIN/treeqa" train attach rta "$RUN/lora/adapter.gguf" "$RUN/compiled-rta.json" --dataset hotpotqa
            "$BIN/treeqa" train score "$RUN/compiled-rta.json" --set "$RUN/reads" --out "$OUT/val-scores.jsonl" \
                --per-question 1 --no-cache
            "$BIN/python" benchmarks/released_reader.py "$OUT/val-scores.jsonl" \
                benchmarks/runs/lora-recipes/base/val-scores.jsonl > "$OUT/validation.json" ;;
        release)
            "$BIN/python" -c "import json, sys; from treeqa.train.released import release; \
release('$RUN', trained_from='$COMMIT', validation=json.load(open('$OUT/validation.json')))" ;;
        yes-no)
            [ -f "$RUN/reads/reads.jsonl" ] || "$BIN/python" -c "from pathlib import Path; \
from treeqa.train.reader import ReaderRecipe, build_reads; build_reads(Path('$RUN/reads'), ReaderRecipe())"
            [ -f "$RUN/compiled-rta-released.json" ] ||
                "$BIN/treeqa" train attach rta treeqa/train/released/adapter.gguf "$RUN/compiled-rta-released.json" \
                    --dataset hotpotqa
            "$BIN/treeqa" train yes-no "$RUN/compiled-rta-released.json" --set "$RUN/reads" --out "$OUT/yes-no" --no-cache
            "$BIN/python" -c "import json; from treeqa.train.released import add_yes_no; \
add_yes_no(json.load(open('$OUT/yes-no/yes-no.json')), 'bash benchmarks/released_reader.sh yes-no')" ;;
        *) echo "unknown step: $step" >&2; exit 2 ;;
    esac
done
