#!/usr/bin/env bash
# Issue 24, item 1: what the path-judge ToR reader reads, chosen on train by EM (never on dev).
# The path judge is compiled with read_top None / 5 / 3 (no LM call: 20 s each), then each
# program answers the same N seeded train questions. The DSPy response cache is ON
# here on purpose: read_top changes only the last call (the reader), so the second and third
# programs reuse the first one's search and pay only their own reader calls; timings are
# therefore not comparable and not reported. The judge was fitted on the annotations of
# the first 100 seeded train questions, these N among them, so EM here is higher
# than on dev; what matters is the difference between the readers.
# A choice is a read_top (none, 3, 5), FUSION-READ_TOP for another fusion reader (e.g.
# paragraph-5: the accepted paths' paragraphs and the 5 best others, no analyses), or rta (one
# retrieval on the same questions: the bar the reader has to clear). DATASET (default hotpotqa)
# chooses on another set's train questions, with the judge fitted on that set's train; N (default
# 40, at most 100) how many of the judge's train questions answer.
#   [DATASET=2wikimultihopqa] [N=100] bash benchmarks/choose_reading.sh [choice ...]   (default: none 5 3)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
DATASET=${DATASET:-hotpotqa}
N=${N:-40}
[ "$N" -ge 1 ] && [ "$N" -le 100 ] || { echo "N must be 1-100 (the judge is fitted on the first 100 train questions), got $N" >&2; exit 2; }
OUT=${OUT:-benchmarks/runs/$DATASET-train$N-reading}
choices=("$@")
[ ${#choices[@]} -gt 0 ] || choices=(none 5 3)
for rt in "${choices[@]}"; do
    if [ "$rt" = rta ]; then
        "$BIN/treeqa" evaluate --program rta --dataset "$DATASET" --split train --n "$N" --out "$OUT/train$N-rta"
        continue
    fi
    param=()
    case "$rt" in
        none) ;;
        *-*) param=(--param "fusion=${rt%-*}" --param "read_top=${rt#*-}") ;;
        *) param=(--param "read_top=$rt") ;;
    esac
    [ -f "$OUT/compile-$rt/compiled.json" ] ||
        "$BIN/treeqa" optimize --program tor --dataset "$DATASET" --optimizer path-judge --train 100 --dev 1 \
            "${param[@]}" --out "$OUT/compile-$rt"
    "$BIN/treeqa" evaluate --compiled "$OUT/compile-$rt/compiled.json" --dataset "$DATASET" --split train --n "$N" \
        --out "$OUT/train$N-$rt"
done
"$BIN/python" - "$OUT/train$N" "${choices[@]}" <<'EOF'
import json, sys
from pathlib import Path
from treeqa.evaluation.records import read_records, records_file
from treeqa.evaluation.stats import compare_records
out, choices = Path(sys.argv[1]), sys.argv[2:]
runs = {rt: read_records(records_file(out.parent / f"{out.name}-{rt}")) for rt in choices}
for rt, records in runs.items():
    em = 100 * sum(r["em"] for r in records) / len(records)
    fallback = sum(1 for r in records if (r.get("tree") or {}).get("stats", {}).get("fused_from") in ("fallback", "top"))
    print(f"{rt}: n={len(records)} EM {em:.1f}; no accepted path on {fallback}")
base = choices[0]
for rt in choices[1:]:
    print(f"{rt} vs {base}: {json.dumps(compare_records(runs[rt], runs[base]))}")
if "rta" in runs:
    for rt in choices:
        if rt not in ("rta", base):
            print(f"{rt} vs rta: {json.dumps(compare_records(runs[rt], runs['rta']))}")
EOF
