"""`benchmarks/reasons_compare.sh`: the two sides of the reasons comparison train on the same reads,
only the reasons side answers through the reasoning reader, and every run reads the claim sample.
The script is driven with a stand-in `python` that records each treeqa command."""

import json
import os
import subprocess
import sys

from treeqa.settings import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "benchmarks" / "reasons_compare.sh"
# records each `-m treeqa.cli ...` command and makes the files the next step reads; a heredoc
# (`python -`) runs in the real interpreter
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = - ]; then exec {python} "$@"; fi
shift 2
printf '%s\\n' "$*" >> "$LOG"
if [ "$1 $2" = "train lora" ]; then
  while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
  mkdir -p "$out" && echo '{{}}' > "$out/curve.json" && echo '{{}}' > "$out/training.json"
  touch "$out/adapter.gguf"
fi
if [ "$1 $2" = "train attach" ]; then echo '{{}}' > "$5"; fi
if [ "$1 $2" = "train reasons" ]; then mkdir -p "$SET" && echo '{{}}' > "$SET/reasons.jsonl"; fi
"""


def _drive(tmp_path, *steps):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "commands.log"
    env = {**os.environ, "BIN": str(bin_dir), "LOG": str(log), "WORK": str(tmp_path / "work"),
           "RUNS": str(tmp_path / "runs"), "KEEP": str(tmp_path / "kept"), "SET": str(tmp_path / "set"),
           "N": "120",
           "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run(["bash", str(SCRIPT), *steps], env=env, capture_output=True, text=True, cwd=tmp_path)
    commands = log.read_text().splitlines() if log.is_file() else []
    return done, commands


def test_both_sides_train_on_the_same_reads_and_only_the_reasons_side_reasons(tmp_path, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    done, commands = _drive(tmp_path, "reasons", "train-reasons", "train-control", "base-reason", "eval-reasons",
                            "eval-control")
    assert done.returncode == 0, done.stderr
    trainings = [c for c in commands if c.startswith("train lora")]
    assert len(trainings) == 2
    reads = f"--set {tmp_path / 'set'} --per-question 1 --yes-no-built --limit 120"
    assert commands[0] == f"train reasons {reads} --no-cache"
    assert all(reads in c for c in trainings)
    assert trainings[0].endswith("--with-reasons") and trainings[1].endswith("--reasoned-only")
    attaches = [c for c in commands if c.startswith("train attach")]
    assert "--param reason=true" in attaches[0] and "--param" not in attaches[1]
    evaluations = [c for c in commands if c.startswith("evaluate")]
    assert len(evaluations) == 3
    assert all("--dataset hotpotqa --skip 100 --n 197 --no-cache" in c for c in evaluations)
    assert "--program rta --param reason=true" in evaluations[0]
    assert f"{tmp_path / 'work' / 'reasons' / 'compiled.json'}" in evaluations[1]
    assert f"{tmp_path / 'work' / 'reasoned-only' / 'compiled.json'}" in evaluations[2]
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == [
        "lora-reader-rta-reasoned-only", "lora-reader-rta-reasons", "reader-v3"]


def test_compare_pairs_the_runs_that_exist_and_an_unknown_step_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    for run, ems in (("rta", [1, 0, 0, 0]), ("rta-reason", [1, 1, 1, 0])):
        folder = tmp_path / "runs" / run
        folder.mkdir(parents=True)
        records = [{"id": f"q{i}", "em": float(em), "f1": float(em)} for i, em in enumerate(ems)]
        (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done, _ = _drive(tmp_path, "compare")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rta-reason vs rta:")
    assert json.loads(lines[0].split(":", 1)[1])["em"]["diff"] == 50.0
    refused, _ = _drive(tmp_path, "bogus")
    assert refused.returncode == 2 and "unknown step bogus" in refused.stderr
