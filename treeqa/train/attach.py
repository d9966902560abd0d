"""Putting a trained adapter on a program's predictors, saved as a new compiled file: a compiled
program (its reading settings may change), or a program named by its name (its zero-shot
settings). The adapter is copied beside the file and recorded with its size, sha256 and, where
it has one, its training record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from treeqa.data import DEFAULT_DATASET
from treeqa.evaluation.replay import NoSearch, with_reading
from treeqa.programs import PROGRAMS, build_program
from treeqa.programs.compiled import (
    CompiledFile,
    CompiledProgramError,
    attach_adapter,
    load_program,
    read_recipe,
    save_compiled,
)
from treeqa.retrievers import DEFAULT_KIND


def source_program(source: str, dataset: str | None,
                   params: dict | None = None) -> tuple[Any, dict[str, Any], Path | None]:
    """(program, recipe, compiled file or None) of `source`: a compiled file, or a program's name
    (its zero-shot settings with `params` in place, searching `dataset`'s corpus with the default
    retriever)."""
    path = Path(source)
    if path.is_file() or source not in PROGRAMS:
        if not path.is_file():
            raise CompiledProgramError(f"{source}: neither a compiled file nor a program ({', '.join(PROGRAMS)})")
        found = CompiledFile.read(path)
        recipe, _ = read_recipe(path)
        return load_program(with_reading(found, params or {}), retriever=NoSearch()), recipe, path
    dataset = dataset or DEFAULT_DATASET
    recipe = {"program": source, "dataset": dataset, "retriever": DEFAULT_KIND, "params": dict(params or {}),
              "compile": {"optimizer": "none (zero-shot)"}}
    try:
        return build_program(source, NoSearch(), **(params or {})), recipe, None
    except (TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{source}: {exc}") from None


def attach_to_compiled(source: str | Path, adapter: Path, out: Path, predictors: list[str],
                       dataset: str | None = None, params: dict | None = None) -> tuple[Path, list[str]]:
    """Write `out`: the program of `source` (a compiled file, or a program's name for its zero-shot
    settings) with `adapter` on `predictors` (default: the program's own reader), the adapter
    copied beside `out` and recorded with its size and sha256 as `optimize` records one, and
    the adapter's training record (`training.json` beside it) where there is one. Returns (out,
    the predictors)."""
    program, recipe, compiled = source_program(str(source), dataset, params)
    predictors = predictors or [type(program).reader]
    if None in predictors:
        raise CompiledProgramError(f"{source}: a {recipe['program']!r} program has no reader; name the "
                                   "predictors with --predictor")
    attach_adapter(program, adapter, predictors, path=compiled or source)  # the engine loads on a first call only
    extra = {key: recipe[key] for key in ("compile", "corpus") if key in recipe}
    extra["adapter_added"] = {"from": str(compiled) if compiled else f"{recipe['program']} (zero-shot)",
                              "adapter": adapter.name, "predictors": predictors}
    if params and compiled:
        extra["adapter_added"]["reading"] = dict(params)
    training = adapter.parent / "training.json"
    if training.is_file():
        record = json.loads(training.read_text())
        report = record.get("report") or {}
        extra["adapter_added"]["training"] = {
            "recipe": record.get("recipe"), "examples": report.get("examples"), "steps_done": report.get("steps_done"),
            "steps_total": report.get("steps_total"), "best": report.get("best"), "curve": report.get("curve")}
    path = save_compiled(program, out, name=recipe["program"], dataset=recipe["dataset"],
                         retriever=recipe.get("retriever", "dense"), preset=recipe.get("preset"),
                         params=recipe.get("params") or {}, extra=extra)
    return path, predictors
