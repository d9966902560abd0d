#!/usr/bin/env bash
# Copy the per-question records of runs made in a frozen checkout (a git worktree at a fixed
# commit, where long benchmark runs go on while main moves) into this checkout's benchmarks/runs,
# so they can be committed as they grow. Lock files stay behind.
#   bash benchmarks/sync_runs.sh /path/to/frozen [run-folder ...]
set -euo pipefail
cd "$(dirname "$0")/.."
frozen=$1; shift
for run in "$@"; do
    (cd "$frozen/benchmarks/runs" && find "$run" -type f ! -name .lock -print0) |
        while IFS= read -r -d '' file; do
            mkdir -p "benchmarks/runs/$(dirname "$file")"
            cp -p "$frozen/benchmarks/runs/$file" "benchmarks/runs/$file"
        done
done
