"""Compiled programs on disk: DSPy's JSON state plus what it takes to rebuild the program.

The file is what `program.save("x.json")` writes (demos and instructions per predictor,
DSPy's dependency versions) with one extra key, "treeqa", naming the program, its
settings and its retriever. `load_program` rebuilds that program and loads the state, so an
app needs one line. Only JSON is read: pickled programs are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dspy

FORMAT = 1


class CompiledProgramError(ValueError):
    """A compiled file that is missing, not ours, or for another program."""


def save_compiled(program: dspy.Module, path: str | Path, *, name: str, dataset: str, retriever: str,
                  preset: str | None = None, params: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None) -> Path:
    """Write `program`'s state and its recipe to `path` (.json)."""
    path = Path(path)
    if path.suffix != ".json":
        raise CompiledProgramError(f"compiled programs are saved as .json, not {path.suffix or 'no suffix'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    state = json.loads(path.read_text())
    state["treeqa"] = {"format": FORMAT, "program": name, "dataset": dataset, "retriever": retriever,
                       "preset": preset, "params": params or {}, **(extra or {})}
    path.write_text(json.dumps(state, indent=2, ensure_ascii=False))
    return path


def read_recipe(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (recipe, state) of a compiled file, with clear errors for anything else."""
    path = Path(path)
    if path.suffix != ".json":
        raise CompiledProgramError(f"{path}: only .json compiled programs are loaded (pickles are never read)")
    if not path.is_file():
        raise CompiledProgramError(f"{path}: no such compiled program")
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CompiledProgramError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    recipe = state.get("treeqa") if isinstance(state, dict) else None
    if not isinstance(recipe, dict) or "program" not in recipe:
        raise CompiledProgramError(f"{path}: not a treeqa compiled program (no 'treeqa' section); "
                                   "load plain DSPy state with program.load(path) on a program you build")
    return recipe, state


def load_program(path: str | Path, retriever=None, expect: str | None = None) -> dspy.Module:
    """A ready-to-call compiled program.

    Args:
        path: a file written by `treeqa optimize` (or `save_compiled`).
        retriever: the retriever to search with; by default the index of the dataset the
            program was compiled on, loaded from the cache dir (built if missing).
        expect: the program name the caller wants ("tor", "beam", ...); a file holding
            another program is an error.

    Example:
        >>> program = load_program("runs/optimize/tor/compiled.json")
        >>> dspy.configure(lm=get_lm("local"))
        >>> program(question="Who wrote Hamlet?").answer
    """
    from treeqa.programs import build_program, uses_retriever

    recipe, state = read_recipe(path)
    name = recipe["program"]
    if expect is not None and expect != name:
        raise CompiledProgramError(f"{path} holds a compiled {name!r} program, not {expect!r}")
    params, preset = recipe.get("params") or {}, recipe.get("preset")
    if retriever is None and uses_retriever(name, params, preset):
        from treeqa.retrievers import get_retriever

        retriever = get_retriever(recipe["dataset"], recipe.get("retriever", "dense"))
    program = build_program(name, retriever, preset=preset, **params)
    try:
        program.load_state(state)
    except (KeyError, TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{path}: its state does not fit a {name!r} program with these settings "
                                   f"({type(exc).__name__}: {exc})") from exc
    return program
