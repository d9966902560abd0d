"""One evaluation run, described by a spec, written to a folder: predictions, summary, command."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from treeqa.settings import PROJECT_ROOT

RUNS_DIR = PROJECT_ROOT / "runs"


class EvalSpec(BaseModel):
    """Everything that decides an evaluation's results; its hash names the default folder."""

    program: str
    dataset: str = "hotpotqa"
    split: str = "dev"
    n: int = Field(30, ge=1)
    seed: int = 0
    lm: str = "local"
    api_base: str | None = None
    retriever: str = "dense"
    preset: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    threads: int = Field(1, ge=1)
    cache: bool = True  # DSPy's response cache; off for runs whose costs are reported

    def key(self) -> str:
        decisive = self.model_dump(exclude={"threads", "api_base", "cache"})
        return hashlib.sha1(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:8]

    def default_out(self) -> Path:
        label = self.program + (f"-{self.preset}" if self.preset else "")
        return RUNS_DIR / f"{self.dataset}-{self.split}-n{self.n}-s{self.seed}" / f"{label}-{self.key()}"


def versions() -> dict[str, str]:
    from treeqa import __version__

    out = {"treeqa": __version__}
    for package in ("dspy", "llama-cpp-python", "sentence-transformers", "faiss-cpu"):
        out[package] = version(package)
    return out


def markdown_table(rows: dict[str, dict[str, Any]]) -> str:
    """Rows of summary figures (label -> summary) as a Markdown table."""
    columns = ["n", "em", "f1", "recall@15", "lm_calls_per_q", "prompt_tokens_per_q",
               "completion_tokens_per_q", "seconds_per_q", "failed_calls", "errors"]
    lines = ["| program | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, summary in rows.items():
        lines.append(f"| {label} | " + " | ".join(str(summary.get(c, "–")) for c in columns) + " |")
    return "\n".join(lines)


def split_threads(program: str, threads: int, lm) -> tuple[int, int]:
    """(calls in parallel inside a question, questions in parallel) for `--threads`.

    The embedded engine serves one call at a time: both are 1. Against an endpoint, beam and
    tor send a level's calls together; the single-path programs run questions in parallel.
    """
    from treeqa.lm import LlamaEngine

    if threads <= 1 or isinstance(getattr(lm, "_engine_spec", None), LlamaEngine):
        return 1, 1
    return (threads, 1) if program in ("beam", "tor") else (1, threads)


def run_evaluation(spec: EvalSpec, out: str | Path | None = None, program=None) -> dict[str, Any]:
    """Evaluate `spec` (or a given, e.g. compiled, `program`), resuming from the folder's predictions."""
    import dspy

    from treeqa.data import load_examples
    from treeqa.evaluation import evaluate
    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs import build_program, uses_retriever
    from treeqa.retrievers import get_retriever

    out_dir = Path(out) if out else spec.default_out()
    out_dir.mkdir(parents=True, exist_ok=True)
    examples = load_examples(spec.dataset, spec.split, n=spec.n, seed=spec.seed)
    lm = get_lm(spec.lm, api_base=spec.api_base, cache=spec.cache)
    inner, outer = split_threads(spec.program, spec.threads, lm)
    if program is None:
        retriever = (get_retriever(spec.dataset, spec.retriever)
                     if uses_retriever(spec.program, spec.params, spec.preset) else None)
        params = {**spec.params, **({"threads": inner} if inner > 1 else {})}
        program = build_program(spec.program, retriever, preset=spec.preset, **params)
    elif inner > 1 and hasattr(program, "threads"):
        program.threads = inner
    (out_dir / "spec.json").write_text(spec.model_dump_json(indent=2))
    adapter = adapter_for(lm)
    with dspy.context(lm=lm, adapter=adapter):
        result = evaluate(program, examples, lm=lm, out_path=out_dir / "predictions.jsonl", threads=outer,
                          desc=f"{spec.program} on {spec.dataset}", adapter=adapter)
    label = spec.program + (f" ({spec.preset})" if spec.preset else "")
    summary = {"summary": result["summary"], "spec": spec.model_dump(),
               "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]), "versions": versions()}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return {"summary": result["summary"], "out": out_dir, "table": markdown_table({label: result["summary"]})}
