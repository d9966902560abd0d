#!/usr/bin/env bash
# Does treeqa's wheel install as an app would install it, with a DSPy release other than the
# pinned one, and import?
#
#   benchmarks/wheel_install.sh [DIR] [DSPY_VERSION]
#
#   DIR           scratch folder (default /tmp/treeqa-wheel-check); DIR/src, DIR/dist and DIR/venv
#                 are removed and made again, DIR/install.log keeps pip's output
#   DSPY_VERSION  the DSPy release to install beside the wheel; by default the newest release
#                 inside pyproject.toml's dspy range other than constraints.txt's pin, of the
#                 pin's minor release if there is one
#
# It builds the wheel from this checkout's files (pip wheel --no-deps), makes a fresh venv, installs
# torch==2.13.0 first (the CPU build on this machine's disk, so nothing pulls a CUDA build),
# then the wheel with dspy==DSPY_VERSION WITHOUT constraints.txt: pip resolves everything else
# inside pyproject.toml's ranges. Then, outside the checkout, it imports treeqa and
# treeqa.programs, lists the programs and runs `treeqa --help`, prints the versions it ended up
# with and PASS or FAIL (exit 0 or 1; 2 when the range holds no release but the pin and none
# was given). llama-cpp-python (a base dependency) compiles from source with the Makefile's
# flags (minutes); everything else downloads from PyPI, so this is not part of the test suite.
# On a busy machine run it niced: nice -n 10 benchmarks/wheel_install.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/treeqa-wheel-check}
dspy=${2:-}
python=${PYTHON:-python3}
start=$(date +%s)
step="choosing the DSPy release"
fail() {
    echo "FAIL: $step (line $1)"
    case $step in
        build*|install*) grep -v "^WARNING: Location" "$dir/install.log" | tail -n 12; echo "(all of it: $dir/install.log)" ;;
    esac
    exit 1
}
trap 'fail $LINENO' ERR

pinned=$(sed -n 's/^dspy==//p' "$repo/constraints.txt")
if [ -z "$dspy" ]; then
    dspy=$("$python" - "$repo/pyproject.toml" "$pinned" <<'EOF'
import re, subprocess, sys, tomllib
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.version import Version

pyproject, pinned = sys.argv[1], Version(sys.argv[2])
spec = next(r.specifier for r in map(Requirement, tomllib.load(open(pyproject, "rb"))["project"]["dependencies"])
            if r.name == "dspy")
listing = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "dspy"], capture_output=True,
                         text=True, check=True).stdout
released = [Version(v) for v in re.search(r"Available versions: (.*)", listing).group(1).split(", ")]
others = [v for v in released if v in spec and v != pinned and not v.is_prerelease]
same_minor = [v for v in others if v.release[:2] == pinned.release[:2]]
print(max(same_minor or others, default=""))
EOF
)
    if [ -z "$dspy" ]; then
        echo "SKIP: pyproject.toml's dspy range holds no release but the pin ($pinned); pass a version to try one"
        exit 2
    fi
fi
echo "treeqa from $repo ($(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?')); DSPy $dspy (pinned: $pinned)"

mkdir -p "$dir"
rm -rf "$dir/src" "$dir/dist" "$dir/venv"
: > "$dir/install.log"
# built from a copy of the checkout's files (git's tracked and unignored ones, without the recorded
# runs), so setuptools' build/ and egg-info land in DIR and no stale build/ of the checkout gets in
step="building the wheel"
mkdir "$dir/src"
git -C "$repo" ls-files -z -co --exclude-standard -- . ':(exclude)benchmarks/runs' \
    | tar -C "$repo" --null -T - --ignore-failed-read -cf - | tar -C "$dir/src" -xf -
"$python" -m pip wheel -q --no-deps -w "$dir/dist" "$dir/src" >> "$dir/install.log" 2>&1
wheel=$(ls "$dir"/dist/treeqa-*.whl)
"$python" -m venv "$dir/venv"
pip=("$dir/venv/bin/python" -m pip)
step="installing torch"
"${pip[@]}" install -q torch==2.13.0 >> "$dir/install.log" 2>&1
step="installing the wheel with dspy==$dspy"
# the Makefile's llama.cpp flags (no AMX kernels), so a wheel pip caches from this build is a safe one
CMAKE_ARGS=${CMAKE_ARGS:-$(sed -n 's/^LLAMA_CMAKE_ARGS := //p' "$repo/Makefile")} \
    "${pip[@]}" install "$wheel" "dspy==$dspy" >> "$dir/install.log" 2>&1

# from DIR, so the checkout's treeqa/ cannot shadow the installed one
cd "$dir"
step="importing treeqa"
venv/bin/python - "$dspy" <<'EOF'
import sys
from importlib.metadata import version

import treeqa

print(treeqa.__version__, treeqa.__file__)
assert "site-packages" in treeqa.__file__, "treeqa was not imported from the venv"
import treeqa.programs  # noqa: E402,F401
from treeqa import list_programs  # noqa: E402

print(list(list_programs()))
assert version("dspy") == sys.argv[1], f"dspy {version('dspy')} installed, not {sys.argv[1]}"
EOF
step="running treeqa --help"
venv/bin/treeqa --help > treeqa-help.txt
echo "treeqa --help: $(grep -E "^│ [a-z]" treeqa-help.txt | awk '{print $2}' | paste -sd' ')"
step="listing the versions"
echo "--- versions"
"${pip[@]}" freeze 2>/dev/null | grep -i -E "^(dspy|treeqa|litellm|pydantic)"
"${pip[@]}" freeze 2>/dev/null | grep -i -E "^(torch|llama)"
echo "--- $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s"
echo "PASS: the wheel installed with DSPy $dspy (pinned: $pinned) and imported"
