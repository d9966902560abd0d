#!/usr/bin/env bash
# The LoRA recipe chosen on training questions, never on a claim sample (docs/finetune.md): each
# recipe trains on the same fair sample of the reader set's train reads (`--limit`, hashed order),
# and is judged by its validation curve and by validation EM (`train score`: rta's reader with the
# adapter answering the set's held-out reads). Every step resumes; run it alone.
#   bash benchmarks/lora_recipes.sh [recipe ...]     (default: every recipe below, then the table)
#   SET    the reader set (default .cache/reader-sets/v5, whose evidence reads cannot be answered by their form
#          alone: v3's 52 evidence reads of 118 would reward that in validation EM; `treeqa train reads` rebuilds it)
#   N      train reads a recipe sees (default 320, drawn with v4's --yes-no-built: every built read of a
#          yes/no question joins the pool); VAL validation reads scored (default 118: one a validation
#          question of v3 and v5)
#   WORK   where trainings go (default .cache/lora/recipes); OUT where curves and scores are
#          copied for committing (default benchmarks/runs/lora-recipes)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
SET=${SET:-.cache/reader-sets/v5}
N=${N:-320}
VAL=${VAL:-118}
WORK=${WORK:-.cache/lora/recipes}
OUT=${OUT:-benchmarks/runs/lora-recipes}
T="$BIN/python -m treeqa.cli"
# name -> `train lora` options beyond the shared ones (top 8 layers, r16, lr 2e-4, 1 epoch are the defaults)
declare -A RECIPES=(
  [k8-r16-lr2e-4-e1]=""
  [k8-r16-lr2e-4-e3]="--epochs 3"
  [k4-r16-lr2e-4-e1]="--top-layers 4"
  [k12-r16-lr2e-4-e1]="--top-layers 12"
  [k8-r32-lr2e-4-e1]="--rank 32 --alpha 64"
  [k8-r16-lr5e-4-e1]="--learning-rate 5e-4"
  [k8-r16-lr1e-3-e1]="--learning-rate 1e-3"
)
# lr 1e-3 joined when lr 5e-4 led 2e-4 (benchmarks/runs/lora-recipes/NOTES.md)
ORDER=(k8-r16-lr2e-4-e1 k8-r16-lr5e-4-e1 k8-r32-lr2e-4-e1 k8-r16-lr1e-3-e1 k4-r16-lr2e-4-e1 k12-r16-lr2e-4-e1
       k8-r16-lr2e-4-e3)

score() {  # score SOURCE NAME: validation EM of a reader (a compiled file, or rta zero-shot)
  $T train score "$1" --set "$SET" --per-question 1 --limit "$VAL" --no-cache --out "$WORK/$2/val-scores.jsonl"
  mkdir -p "$OUT/$2" && cp "$WORK/$2/val-scores.jsonl" "$OUT/$2/"
}

recipe() {  # recipe NAME: train, put the adapter on rta, score
  local name=$1 dir=$WORK/$1
  # shellcheck disable=SC2086  # the recipe's options are words
  $T train lora --set "$SET" --out "$dir" --per-question 1 --yes-no-built --limit "$N" --top-dtype auto \
    --validate-every $((N / 4)) --validation-reads 64 ${RECIPES[$name]}
  $T train attach rta "$dir/adapter.gguf" "$dir/compiled.json"
  score "$dir/compiled.json" "$name"
  cp "$dir/curve.json" "$dir/training.json" "$OUT/$name/"
}

table() {  # one row a recipe: best validation loss; validation EM, F1 and EM paired with the base reader; then EM by dataset and kind
  "$BIN/python" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
from treeqa.evaluation.stats import compare_records
out = Path(sys.argv[1])
def scores(folder):
    return [json.loads(line) for line in (folder / "val-scores.jsonl").read_text().splitlines() if line.strip()]
base = scores(out / "base") if (out / "base" / "val-scores.jsonl").is_file() else None
print("| recipe | best validation loss (at; the base model's) | validation EM | F1 | EM − base [95% CI] (won/lost) | reads | training s |")
print("|---|---|---|---|---|---|---|")
for folder in sorted(p for p in out.iterdir() if (p / "val-scores.jsonl").is_file()):
    rows = scores(folder)
    em = 100 * sum(r["em"] for r in rows) / len(rows)
    f1 = 100 * sum(r["f1"] for r in rows) / len(rows)
    paired = "–"
    if base is not None and folder.name != "base":
        e = compare_records(rows, base, keys=("em",))["em"]
        paired = f"{e['diff']:+.1f} [{e['ci'][0]:+.1f}, {e['ci'][1]:+.1f}] ({e['wins']}/{e['losses']})"
    training = folder / "training.json"
    report = json.loads(training.read_text())["report"] if training.is_file() else {}
    best = report.get("best") or {}
    start = next((point["val_loss"] for point in report.get("curve", []) if point["step"] == 0), None)
    loss = f"{best['val_loss']:.4f} ({best['step']}; from {start:.4f})" if best else "– (base model)"
    print(f"| {folder.name} | {loss} | {em:.1f} | {f1:.1f} | {paired} | {len(rows)} | {report.get('seconds', '–')} |")
# where a gain comes from: validation EM by the reads' dataset and kind (the claim samples read rta's own passages)
folders = sorted(p for p in out.iterdir() if (p / "val-scores.jsonl").is_file())
first = scores(folders[0]) if folders else []
groups = sorted({(field, r[field]) for r in first for field in ("dataset", "kind")})
if groups:
    print("\n| recipe | " + " | ".join(f"{value} ({sum(r[field] == value for r in first)})"
                                          for field, value in groups) + " |")
    print("|---|" + "---|" * len(groups))
for folder in folders if groups else []:
    rows = scores(folder)
    cells = []
    for field, value in groups:
        group = [r["em"] for r in rows if r[field] == value]
        cells.append(f"{100 * sum(group) / len(group):.0f}" if group else "–")
    print(f"| {folder.name} | " + " | ".join(cells) + " |")
EOF
}

mkdir -p "$WORK" "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(base "${ORDER[@]}" table)
for step in "${steps[@]}"; do
  case $step in
    base) score rta base ;;
    table) table | tee "$OUT/table.md" ;;
    *) [ -n "${RECIPES[$step]+x}" ] || { echo "unknown recipe $step (${ORDER[*]})" >&2; exit 2; }
       recipe "$step" ;;
  esac
done
