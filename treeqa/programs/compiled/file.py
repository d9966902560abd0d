"""The compiled file's format: DSPy's JSON state plus a "treeqa" section, read once into a
`CompiledFile` that every command passes along (the one module that knows the section's keys
and their defaults).

The section names the program, every one of its settings (as the program reports them, not
as they were typed), its dataset, retriever and corpus, what the compile recorded and any
LoRA adapter. Files of format 1 (before settings were stored) kept the command-line params and
preset, and still load. Only JSON is read, bounded in size, with finite numbers only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treeqa.retrievers import DEFAULT_KIND

FORMAT = 2
MAX_FILE_BYTES = 4 << 20  # a real compile: 3 demos of ~1.5 KB, ~16 KB a file
DEFAULT_RETRIEVER = DEFAULT_KIND  # what a file that names no retriever searched with


class CompiledProgramError(ValueError):
    """A compiled file that is missing, not ours, or for another program."""


@dataclass(frozen=True)
class CompiledFile:
    """A compiled file, read once.

    Args:
        path: where it was read from.
        program: the program's name.
        dataset: the dataset it was compiled on.
        retriever: the retriever it searched with ("dense" where the file names none).
        corpus: the corpus it searched, where not the dataset's own.
        settings: the stored settings (format 2); None in a format-1 file.
        params: the command line's `--param` values, as recorded.
        preset: the preset, as recorded.
        compile: what the compile recorded (`optimize`'s counts, fitted settings, ...); {} if none.
        adapter: the LoRA adapter's record, unchecked (`treeqa.lm.adapter.AdapterRef`), or None.
        state: the whole JSON state (DSPy's predictors, the section included).
        yes_no: the reader's yes/no calibration (`treeqa.programs.compiled.yes_no`), or None.
    """

    path: Path
    program: str
    dataset: str | None
    retriever: str
    corpus: str | None
    settings: dict[str, Any] | None
    params: dict[str, Any]
    preset: str | None
    compile: dict[str, Any]
    adapter: Any
    state: dict[str, Any] = field(repr=False)
    yes_no: dict[str, Any] | None = None

    @classmethod
    def read(cls, path: str | Path) -> CompiledFile:
        """The file at `path`, with clear errors for anything that is not a compiled program."""
        recipe, state = read_recipe(path)
        return cls.of(recipe, state, Path(path))

    @classmethod
    def of(cls, recipe: dict[str, Any], state: dict[str, Any], path: Path | None = None) -> CompiledFile:
        """A compiled file from its section and state (a zero-shot run's program described alike)."""
        settings = recipe.get("settings")
        return cls(path=Path(path) if path is not None else Path(), program=recipe["program"],
                   dataset=recipe.get("dataset"), retriever=recipe.get("retriever") or DEFAULT_RETRIEVER,
                   corpus=recipe.get("corpus"), settings=dict(settings) if isinstance(settings, dict) else None,
                   params=dict(recipe.get("params") or {}), preset=recipe.get("preset"),
                   compile=dict(recipe.get("compile") or {}), adapter=recipe.get("adapter"), state=state,
                   yes_no=recipe.get("yes_no"))

    @property
    def folder(self) -> Path:
        return self.path.parent

    def build_settings(self) -> tuple[dict[str, Any], str | None]:
        """(settings, preset) to rebuild the program with: the stored settings (format 2), or the
        command-line params and preset of a format-1 file."""
        if self.settings is not None:
            return dict(self.settings), None
        return dict(self.params), self.preset


def read_recipe(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (recipe, state) of a compiled file, with clear errors for anything else."""
    state = read_state(path)
    recipe = state.get("treeqa") if isinstance(state, dict) else None
    if not isinstance(recipe, dict) or "program" not in recipe:
        raise CompiledProgramError(f"{path}: not a treeqa compiled program (no 'treeqa' section); "
                                   "build the program and call its load(path), which reads DSPy's own state "
                                   "as untrusted too")
    if not isinstance(recipe.get("format", 1), int) or recipe.get("format", 1) > FORMAT:
        raise CompiledProgramError(f"{path}: format {recipe.get('format')!r} is newer than this treeqa reads "
                                   f"({FORMAT}); upgrade treeqa")
    return recipe, state


def read_state(path: str | Path) -> Any:
    """The parsed JSON of a saved program (a treeqa compiled file or DSPy's own state), bounded
    in size and holding finite numbers only."""
    path = Path(path)
    if path.suffix != ".json":
        raise CompiledProgramError(f"{path}: only .json compiled programs are loaded (pickles are never read)")
    if not path.is_file():
        raise CompiledProgramError(f"{path}: no such compiled program")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise CompiledProgramError(f"{path}: {size:,} bytes; a compiled program is at most {MAX_FILE_BYTES:,}")
    try:
        state = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except UnicodeDecodeError as exc:
        raise CompiledProgramError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise CompiledProgramError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError:
        raise CompiledProgramError(f"{path}: nested too deeply to be a compiled program") from None
    except ValueError as exc:  # NaN or Infinity
        raise CompiledProgramError(f"{path}: {exc}") from None
    return state


def _no_constant(name: str):
    """Python's json reads NaN and Infinity; a compiled file holds finite numbers only (a NaN
    judge weight would reject every paragraph, and NaN is not JSON for the clients)."""
    raise ValueError(f"{name} is not a finite number; a compiled file holds finite numbers only")


def _finite(text: str) -> float:
    """A JSON number too large for a float (`1e400`) reads as infinity, past `_no_constant`."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number; a compiled file holds finite numbers only")
    return value


def recipe_settings(recipe: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(settings, preset) to rebuild the program with: the stored settings (format 2), or the
    command-line params and preset of a format-1 file."""
    if isinstance(recipe.get("settings"), dict):
        return dict(recipe["settings"]), None
    return dict(recipe.get("params") or {}), recipe.get("preset")
