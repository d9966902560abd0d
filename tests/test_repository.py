"""A clone fits a laptop: the tracked files under 40 MB, none over 25 MB, no training's resume state
(`checkpoint.pt`), and no LoRA adapter but the ones the released reader or a row of the README's table
uses (an experiment's stays in history only: benchmarks/runs/ADAPTERS.md).
Training by-products are ignored, so `git add` of a run folder cannot take them."""

import json
import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 25 * 1024 * 1024
CLONE_LIMIT = 40 * 1000 * 1000  # the checked-out files, summed
BY_PRODUCTS = ("benchmarks/runs/x/finetune/checkpoint.pt", "benchmarks/runs/x/finetune/adapter.gguf",
               "benchmarks/runs/x/train-data.jsonl", "benchmarks/runs/x/train.log", "runs/optimize/x/report.json")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _tracked() -> list[str]:
    try:
        return [p for p in _git("ls-files", "-z").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")


def headline_compiled_files(root: Path) -> set[str]:
    """The compiled files the README's rows run: each row's run folder's compiled.json, and the file
    its YAML command names with --compiled (paths relative to `root`)."""
    spec = yaml.safe_load((root / "benchmarks" / "headline.yaml").read_text())
    found = set()
    for column, sample in enumerate(spec["samples"]):
        doc = yaml.safe_load((root / "benchmarks" / f"{sample['yaml']}.yaml").read_text())
        commands = {entry["run"]: entry["command"] for entry in doc["runs"]}
        for row in spec["rows"]:
            run = row["runs"][column]
            if run is None:
                continue
            found.add(f"benchmarks/runs/{sample['yaml']}/{run}/compiled.json")
            found.update(re.findall(r"--compiled (\S+)", commands[run]))
    return found


def _named_adapters(root: Path, files: list[str]) -> set[str]:
    """Every adapter the released reader's record (reader.json) or a compiled file the README's rows
    run (`treeqa.adapter.file`, relative to its folder) names."""
    named = set()
    kept = headline_compiled_files(root) if (root / "benchmarks" / "headline.yaml").is_file() else set()
    for name in files:
        if not name.endswith(".json") or not (root / name).is_file():
            continue
        text = (root / name).read_text(encoding="utf-8", errors="replace")
        if '"adapter"' not in text:
            continue
        try:
            doc = json.loads(text)
            # a compiled file's treeqa section, or a released reader's record (reader.json: recipe, reads, adapter)
            ref = ((doc.get("treeqa") or {}).get("adapter") if name in kept or not name.startswith("benchmarks/")
                   else None) or (doc.get("adapter") if "reads" in doc else None)
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(ref, dict) and isinstance(ref.get("file"), str):
            named.add(str(PurePosixPath(name).parent / ref["file"]))
    return named


def repository_problems(root: Path, files: list[str]) -> list[str]:
    """What in `files` (paths relative to `root`) a clone should not carry, one line each."""
    named = _named_adapters(root, files)
    problems = []
    for name in files:
        path = root / name
        if path.is_file() and path.stat().st_size > LIMIT:
            problems.append(f"{name}: {path.stat().st_size / 1e6:.1f} MB, over 25 MB")
        if PurePosixPath(name).name == "checkpoint.pt":
            problems.append(f"{name}: a training's resume state, not a result")
        if name.endswith(".gguf") and name not in named:
            problems.append(f"{name}: an adapter neither the released reader nor a row of the README's table uses")
    total = sum((root / name).stat().st_size for name in files if (root / name).is_file())
    if total > CLONE_LIMIT:
        problems.append(f"the tracked files: {total / 1e6:.1f} MB, over {CLONE_LIMIT / 1e6:.0f} MB")
    return problems


def test_the_clone_carries_no_training_by_product():
    files = _tracked()
    problems = repository_problems(ROOT, files)
    assert not problems, "\n".join(problems)


def test_each_kind_of_by_product_is_found(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "adapter-aaa.gguf").write_bytes(b"GGUF")
    (tmp_path / "run" / "adapter-bbb.gguf").write_bytes(b"GGUF")
    (tmp_path / "run" / "compiled.json").write_text(json.dumps({"treeqa": {"adapter": {"file": "adapter-aaa.gguf"}}}))
    (tmp_path / "run" / "checkpoint.pt").write_bytes(b"x")
    with open(tmp_path / "big.bin", "wb") as big:  # sparse: its size counts, not its blocks
        big.truncate(LIMIT + 1)
    files = ["run/adapter-aaa.gguf", "run/adapter-bbb.gguf", "run/compiled.json", "run/checkpoint.pt", "big.bin"]
    found = repository_problems(tmp_path, files)
    assert [line.split(":")[0] for line in found] == ["run/adapter-bbb.gguf", "run/checkpoint.pt", "big.bin"]


@pytest.mark.parametrize("path", BY_PRODUCTS)
def test_training_by_products_are_ignored(path):
    _tracked()
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert done.returncode == 0, f"{path} is not ignored by .gitignore"


def test_an_experiment_adapter_is_refused_and_a_headline_rows_kept(tmp_path):
    """Under benchmarks/runs an adapter stays tracked only where a README row's run (its folder's
    compiled.json, or the file its command names with --compiled) records it; and the clone's sum counts."""
    bench = tmp_path / "benchmarks"
    (bench / "runs" / "s" / "row").mkdir(parents=True)
    (bench / "runs" / "lab").mkdir()
    (bench / "headline.yaml").write_text(yaml.safe_dump({
        "samples": [{"title": "S", "yaml": "s"}], "base": "row",
        "rows": [{"label": "row", "runs": ["row"]}, {"label": "other", "runs": ["other"]}]}))
    (bench / "s.yaml").write_text(yaml.safe_dump({"runs": [
        {"run": "row", "command": "treeqa evaluate --program tor"},
        {"run": "other", "command": "treeqa evaluate --compiled benchmarks/runs/lab/named.json --n 5"}]}))
    for folder, compiled, adapter in (("s/row", "compiled.json", "a.gguf"), ("lab", "named.json", "b.gguf"),
                                      ("lab", "unnamed.json", "c.gguf")):
        (bench / "runs" / folder / compiled).write_text(json.dumps({"treeqa": {"adapter": {"file": adapter}}}))
        (bench / "runs" / folder / adapter).write_bytes(b"GGUF")
    files = [str(p.relative_to(tmp_path)) for p in sorted(bench.rglob("*")) if p.is_file()]
    found = repository_problems(tmp_path, files)
    assert [line.split(":")[0] for line in found] == ["benchmarks/runs/lab/c.gguf"]
    with open(bench / "big.bin", "wb") as big:
        big.truncate(CLONE_LIMIT)
    assert repository_problems(tmp_path, [*files, "benchmarks/big.bin"])[-1].startswith("the tracked files:")
