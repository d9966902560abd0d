"""Compiled programs on disk: DSPy's JSON state plus what it takes to rebuild the program.

The file is what `program.save("x.json")` writes (demos and instructions per predictor,
DSPy's dependency versions) with one extra key, "treeqa", naming the program, every one of
its settings (as the program reports them, not as they were typed) and its retriever.
Files of format 1 (before settings were stored) kept the command-line params and preset,
and still load. `load_program` rebuilds that program and loads the state, so an
app needs one line. Only JSON is read: pickled programs are refused.

A compiled file is untrusted input: of each predictor's state only the instructions, the
field prefixes and descriptions, and demos whose keys are the signature's fields are read.
A predictor's "lm" (which DSPy would turn into a client for any provider) and any other key
are dropped with a warning, so a file can never choose where prompts are sent.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import dspy

FORMAT = 2
_SCALARS = (str, int, float, bool, type(None))
# bounds on what a file may make every prompt carry (a real compile: 3 demos of ~1.5 KB, ~16 KB a file)
MAX_FILE_BYTES = 4 << 20
MAX_DEMOS = 32  # per predictor
MAX_DEMO_CHARS = 20_000  # one demo, all its fields
MAX_INSTRUCTION_CHARS = 20_000

log = logging.getLogger(__name__)


class CompiledProgramError(ValueError):
    """A compiled file that is missing, not ours, or for another program."""


def adapter_lms(program: dspy.Module) -> dict[str, Path]:
    """Predictor name -> the LoRA adapter its own LM adds to the embedded model (those that have one)."""
    out = {}
    for name, predictor in program.named_predictors():
        adapter = getattr(predictor.lm, "adapter", None) if predictor.lm is not None else None
        if adapter is not None:
            out[name] = Path(adapter)
    return out


def _save_adapter(program: dspy.Module, folder: Path) -> dict[str, Any] | None:
    """Copy the program's adapter beside the compiled file and describe it (one adapter a program)."""
    import shutil

    from treeqa.lm import base_model_sha256
    from treeqa.lm.adapter import AdapterRef, sha256_of

    adapters = adapter_lms(program)
    if not adapters:
        return None
    if len(set(adapters.values())) > 1:
        raise CompiledProgramError("a compiled program holds one LoRA adapter; its predictors use "
                                   f"{len(set(adapters.values()))}")
    source = next(iter(adapters.values()))
    target = folder / f"adapter-{sha256_of(source)[:12]}.gguf"
    if source.resolve() != target.resolve():
        shutil.copyfile(source, target)
    return AdapterRef.of(target, folder, base_model_sha256(), sorted(adapters)).to_dict()


def save_compiled(program: dspy.Module, path: str | Path, *, name: str, dataset: str, retriever: str,
                  preset: str | None = None, params: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None) -> Path:
    """Write `program`'s state and its recipe to `path` (.json); a LoRA adapter its predictors
    answer through is copied beside it and recorded with its size and hash."""
    path = Path(path)
    if path.suffix != ".json":
        raise CompiledProgramError(f"compiled programs are saved as .json, not {path.suffix or 'no suffix'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    adapter = _save_adapter(program, path.parent)
    lms = {name: p.lm for name, p in program.named_predictors()}
    try:  # an LM is never part of the file (and the embedded engine cannot be serialised)
        for _, predictor in program.named_predictors():
            predictor.lm = None
        program.save(str(path))
    finally:
        for pred_name, predictor in program.named_predictors():
            predictor.lm = lms[pred_name]
    state = json.loads(path.read_text())
    state["treeqa"] = {"format": FORMAT, "program": name, "dataset": dataset, "retriever": retriever,
                       "settings": program.method_settings, "preset": preset, "params": params or {}, **(extra or {})}
    if adapter is not None:
        state["treeqa"]["adapter"] = adapter
    path.write_text(json.dumps(state, indent=2, ensure_ascii=False))
    return path


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


def _json_value(value, depth: int = 0) -> bool:
    if isinstance(value, _SCALARS):
        return True
    if depth < 4 and isinstance(value, list):
        return all(_json_value(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v, depth + 1) for k, v in value.items())
    return False


def _trusted_demo(demo, fields: set[str], where: str) -> dict:
    if not isinstance(demo, dict):
        raise CompiledProgramError(f"{where}: a demo must be an object, got {type(demo).__name__}")
    unknown = set(demo) - fields - {"augmented"}
    if unknown:
        raise CompiledProgramError(f"{where}: a demo has fields the signature lacks: {', '.join(sorted(unknown))}")
    if not all(_json_value(v) for v in demo.values()):
        raise CompiledProgramError(f"{where}: demo values must be plain JSON values")
    if len(json.dumps(demo)) > MAX_DEMO_CHARS:
        raise CompiledProgramError(f"{where}: a demo over {MAX_DEMO_CHARS:,} characters")
    return demo


def _trusted_signature(signature, fields: set[str], where: str) -> dict:
    if not isinstance(signature, dict) or not isinstance(signature.get("instructions"), str):
        raise CompiledProgramError(f"{where}: 'signature' needs 'instructions' as text")
    if len(signature["instructions"]) > MAX_INSTRUCTION_CHARS:
        raise CompiledProgramError(f"{where}: instructions over {MAX_INSTRUCTION_CHARS:,} characters")
    out_fields = []
    for field in signature.get("fields") or []:
        if not isinstance(field, dict) or not all(isinstance(field.get(k, ""), str) for k in ("prefix", "description")):
            raise CompiledProgramError(f"{where}: a signature field needs text 'prefix' and 'description'")
        out_fields.append({k: field[k] for k in ("prefix", "description") if k in field})
    if len(out_fields) > len(fields):
        raise CompiledProgramError(f"{where}: the signature lists more fields than the program's has")
    return {"instructions": signature["instructions"], "fields": out_fields}


def trusted_state(program: dspy.Module, state: dict, path: str | Path) -> dict:
    """The parts of a compiled file's state that `program.load_state` may read (see module doc)."""
    out = {}
    for name, predictor in program.named_predictors():
        if name not in state:
            continue
        where = f"{path}: predictor {name!r}"
        entry = state[name]
        if not isinstance(entry, dict):
            raise CompiledProgramError(f"{where}: its state must be an object")
        dropped = set(entry) - {"demos", "signature", "lm", "traces", "train", "fields"}
        if entry.get("lm"):
            dropped.add("lm")
        if dropped:
            log.warning("%s: ignored %s (a compiled file cannot set these)", where, ", ".join(sorted(dropped)))
        fields = set(predictor.signature.fields)
        demos = entry.get("demos") or []
        if not isinstance(demos, list):
            raise CompiledProgramError(f"{where}: 'demos' must be a list")
        if len(demos) > MAX_DEMOS:
            raise CompiledProgramError(f"{where}: {len(demos):,} demos; at most {MAX_DEMOS} a predictor "
                                       "(each one goes into every prompt)")
        decisions = entry.get("fields") or {}  # DSPy's decision-field settings (thresholds): plain numbers
        if not isinstance(decisions, dict) or not _json_value(decisions):
            raise CompiledProgramError(f"{where}: 'fields' must be an object of plain JSON values")
        out[name] = {"demos": [_trusted_demo(d, fields, where) for d in demos], "traces": [], "train": [],
                     "lm": None, "signature": _trusted_signature(entry.get("signature"), fields, where)}
        if decisions:
            out[name]["fields"] = decisions
    return out


def load_program(path: str | Path, retriever=None, expect: str | None = None,
                 overrides: dict[str, Any] | None = None) -> dspy.Module:
    """A ready-to-call compiled program.

    Args:
        path: a file written by `treeqa optimize` (or `save_compiled`).
        retriever: the retriever to search with; by default the index of the dataset the
            program was compiled on, loaded from the cache dir (built if missing).
        expect: the program name the caller wants ("tor", "beam", ...); a file holding
            another program is an error.
        overrides: settings to run with in place of the stored ones (e.g. the beam's
            `pick="vote"`); an unknown one is an error, as when building the program.

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
    params, preset = recipe_settings(recipe)
    params.update(overrides or {})
    adapter = recorded_adapter_of(recipe, path)  # refused before an index is built for it
    if retriever is None and uses_retriever(name, params, preset):
        from treeqa.retrievers import get_retriever

        retriever = get_retriever(recipe["dataset"], recipe.get("retriever", "dense"), corpus=recipe.get("corpus"))
    program = build_program(name, retriever, preset=preset, **params)
    try:
        program.load_state(trusted_state(program, state, path))
    except (KeyError, TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{path}: its state does not fit a {name!r} program with these settings "
                                   f"({type(exc).__name__}: {exc})") from exc
    if adapter is not None:
        attach_adapter(program, *adapter, path=path)
    return program


def recorded_adapter_of(recipe: dict[str, Any], path: str | Path) -> tuple[Path, tuple[str, ...]] | None:
    """(verified adapter file, predictors) of a compiled file that records one: its size and hash
    match the record, and its tensors fit the base model (`treeqa.lm.adapter.recorded_adapter`);
    its errors as CompiledProgramError."""
    from treeqa.lm.adapter import AdapterError, recorded_adapter

    try:
        return recorded_adapter(recipe, Path(path).parent, str(path))
    except AdapterError as exc:
        raise CompiledProgramError(str(exc)) from None


def attach_adapter(program: dspy.Module, adapter: Path, predictors, path: Path | str = "", cache: bool = True) -> None:
    """Give the named predictors the embedded model with `adapter` added (their own LM)."""
    from treeqa.lm.adapter import AdapterError, attach

    try:
        attach(program, adapter, predictors, cache=cache, where=str(path))
    except AdapterError as exc:
        raise CompiledProgramError(str(exc)) from None


def run_adapters_with(program: dspy.Module, lm, cache: bool) -> None:
    """Fit a program's adapter predictors to the run's LM and cache, as every command must: they
    answer on the embedded model, so an endpoint as the run's LM is refused (it would answer
    only the other predictors), and `--no-cache` reaches them too."""
    from treeqa.lm import is_embedded

    if not adapter_lms(program):
        return
    if not is_embedded(lm):
        raise ValueError("this compiled program answers through a LoRA adapter of the embedded model; "
                         "run it with --lm local")
    set_adapter_cache(program, cache)


def set_adapter_cache(program: dspy.Module, cache: bool) -> None:
    """Turn DSPy's cache on or off for the predictors that run through an adapter (as the run's
    own LM is: `--no-cache` must reach them too)."""
    for _, predictor in program.named_predictors():
        if getattr(predictor.lm, "adapter", None) is not None and predictor.lm.cache != cache:
            predictor.lm = predictor.lm.copy(cache=cache)
