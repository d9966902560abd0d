"""A clone fits a laptop: no tracked file over 25 MB, no training's resume state (`checkpoint.pt`),
and no LoRA adapter that no committed compiled file or released reader's record names (a superseded
one stays in history only).
Training by-products are ignored, so `git add` of a run folder cannot take them."""

import json
import subprocess
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 25 * 1024 * 1024
BY_PRODUCTS = ("benchmarks/runs/x/finetune/checkpoint.pt", "benchmarks/runs/x/finetune/adapter.gguf",
               "benchmarks/runs/x/train-data.jsonl", "benchmarks/runs/x/train.log", "runs/optimize/x/report.json")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _tracked() -> list[str]:
    try:
        return [p for p in _git("ls-files", "-z").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")


def _named_adapters(root: Path, files: list[str]) -> set[str]:
    """Every adapter a compiled file (`treeqa.adapter.file`, relative to its folder) names."""
    named = set()
    for name in files:
        if not name.endswith(".json") or not (root / name).is_file():
            continue
        text = (root / name).read_text(encoding="utf-8", errors="replace")
        if '"adapter"' not in text:
            continue
        try:
            doc = json.loads(text)
            # a compiled file's treeqa section, or a released reader's record (reader.json: recipe, reads, adapter)
            ref = (doc.get("treeqa") or {}).get("adapter") or (doc.get("adapter") if "reads" in doc else None)
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
            problems.append(f"{name}: an adapter no committed compiled file names")
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
