#!/bin/bash
# The runs behind treeqa/teleprompt/released/tor.json (benchmarks/released_settings.py says why):
# the main command's compiled ToR of each dataset, once with each search setting tried, and rta, on
# the released reader's validation questions, live (--no-cache), one after another on one machine.
#   bash benchmarks/released_settings.sh [RUNS]     # default benchmarks/runs/expansion-dev; resumes
#   SIDES="rta linked" bash benchmarks/released_settings.sh     # only these sides (a candidate added later)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-benchmarks/runs/expansion-dev}
R=benchmarks/runs
declare -A COMPILED=([hotpotqa]=$R/hotpotqa-dev-unexamined-skip100-n197 [2wikimultihopqa]=$R/2wikimultihopqa-dev-unexamined-skip50-n100
                     [musique]=$R/musique-dev-unexamined-skip0-n100)
TAKES="hotpotqa-train hotpotqa-dev 2wikimultihopqa-train 2wikimultihopqa-dev musique-train"
.venv/bin/python benchmarks/released_settings.py ids "$RUNS/ids"
# each side's --param values, split on spaces (the candidates of released_settings.py's CANDIDATES)
declare -A PARAMS=([concat]="expansion=concat" [mpc]="expansion=mpc" [linked]="expansion=linked"
                   [root8-evidence2]="expansion=linked widths=[8,3,3] max_evidence=2"
                   [root5]="expansion=linked read_root=5"
                   [root8]="expansion=linked widths=[8,3,3]"
                   [root8-root5]="expansion=linked widths=[8,3,3] read_root=5")
for side in ${SIDES:-concat mpc rta linked root8-evidence2 root5 root8 root8-root5}; do
  for take in $TAKES; do
    dataset=${take%-*} split=${take##*-}
    if [ "$side" = rta ]; then what=(--program rta); else
      what=(--compiled "${COMPILED[$dataset]}/tor-default-compile/compiled.json")
      for param in ${PARAMS[$side]}; do what+=(--param "$param"); done; fi
    echo "== $side $take $(date -u +%H:%M:%S)"
    .venv/bin/treeqa evaluate "${what[@]}" --dataset "$dataset" --split "$split" --ids "$RUNS/ids/$take.ids" \
      --no-cache --out "$RUNS/$take-$side" 2>&1 | grep -v '^llama_adapter' | tail -12
  done
done
.venv/bin/python benchmarks/released_settings.py record "$RUNS" > treeqa/teleprompt/released/tor.json
