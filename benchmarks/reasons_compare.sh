#!/usr/bin/env bash
# What the model's own reasons (STaR, `treeqa train reasons`) add to the reader's training
# (docs/finetune.md). Both sides train on the same reads: the first N train reads of the set in its
# hashed order that gained a kept reason. One side learns the reasoning reader's prompt (the reason,
# then the answer: rta --param reason=true); the control learns rta's bare answer. Each is then put
# on rta and evaluated on the unexamined HotpotQA sample, beside the base reasoning reader.
# Every step resumes; run it alone (one CPU-heavy job at a time).
#   bash benchmarks/reasons_compare.sh [step ...]   (default: every step in order)
#   steps: reasons train-reasons train-control base-reason eval-reasons eval-control compare
#   SET   the reader set (default .cache/reader-sets/v3; `treeqa train reads` rebuilds it)
#   N     train reads searched for a reason (default 400; a larger N keeps the first N's reasons)
#   WORK  where trainings go (default .cache/lora/reasons); RUNS where the claim runs go;
#   KEEP  where what is committed is copied: reasons.jsonl (KEEP/reader-v3) and each training's
#         curve.json and training.json (KEEP/lora-reader-rta-SIDE); default benchmarks/runs
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
SET=${SET:-.cache/reader-sets/v3}
N=${N:-400}
WORK=${WORK:-.cache/lora/reasons}
RUNS=${RUNS:-benchmarks/runs/hotpotqa-dev-unexamined-skip100-n197}
KEEP=${KEEP:-benchmarks/runs}
SAMPLE=(--dataset hotpotqa --skip 100 --n 197 --no-cache)
READS=(--set "$SET" --per-question 1 --yes-no-built --limit "$N")
T="$BIN/python -m treeqa.cli"

train() {  # train NAME FLAG: one side of the comparison, its adapter put on rta
  local dir=$WORK/$1
  $T train lora "${READS[@]}" --out "$dir" --top-dtype auto --validate-every 64 --validation-reads 48 "$2"
  if [ "$2" = --with-reasons ]; then
    $T train attach rta "$dir/adapter.gguf" "$dir/compiled.json" --dataset hotpotqa --param reason=true
  else
    $T train attach rta "$dir/adapter.gguf" "$dir/compiled.json" --dataset hotpotqa
  fi
  mkdir -p "$KEEP/lora-reader-rta-$1"
  cp "$dir/curve.json" "$dir/training.json" "$KEEP/lora-reader-rta-$1/"
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(reasons train-reasons train-control base-reason eval-reasons eval-control compare)
for step in "${steps[@]}"; do
  case $step in
    reasons) $T train reasons "${READS[@]}" --no-cache
             mkdir -p "$KEEP/reader-v3" && cp "$SET/reasons.jsonl" "$KEEP/reader-v3/" ;;
    train-reasons) train reasons --with-reasons ;;
    train-control) train reasoned-only --reasoned-only ;;
    base-reason) $T evaluate --program rta --param reason=true "${SAMPLE[@]}" --out "$RUNS/rta-reason" ;;
    eval-reasons) $T evaluate --compiled "$WORK/reasons/compiled.json" "${SAMPLE[@]}" --out "$RUNS/rta-lora-reasons" ;;
    eval-control) $T evaluate --compiled "$WORK/reasoned-only/compiled.json" "${SAMPLE[@]}" \
                    --out "$RUNS/rta-lora-reasoned-only" ;;
    compare) "$BIN/python" - "$RUNS" <<'EOF'
import json, sys
from pathlib import Path
from treeqa.evaluation.records import read_records, records_file
from treeqa.evaluation.stats import compare_records
runs = Path(sys.argv[1])
for a, b in [("rta-reason", "rta"), ("rta-lora-reasons", "rta-reason"), ("rta-lora-reasoned-only", "rta"),
             ("rta-lora-reasons", "rta-lora-reasoned-only")]:
    if all(records_file(runs / r).is_file() for r in (a, b)):
        cmp = compare_records(read_records(records_file(runs / a)), read_records(records_file(runs / b)))
        print(f"{a} vs {b}:", json.dumps(cmp))
EOF
             ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
