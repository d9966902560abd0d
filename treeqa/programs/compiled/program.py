"""Saving a compiled program and loading it back, ready to call: `load_program` rebuilds the
program a compiled file names, with its settings, LoRA adapter and the index it searched, and
loads its sanitised state, so an app needs one line."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import dspy

from treeqa.programs.compiled.adapters import (
    ENDPOINT_NEEDS_READER_MODEL,
    attach_adapter,
    recorded_adapter_of,
    run_adapters_with,
    save_adapter,
    serve_adapters_from,
)
from treeqa.programs.compiled.file import FORMAT, CompiledFile, CompiledProgramError
from treeqa.programs.compiled.trusted import trusted_state
from treeqa.programs.compiled.yes_no import calibrate_yes_no, yes_no_record

log = logging.getLogger(__name__)


def save_compiled(program: dspy.Module, path: str | Path, *, name: str, dataset: str, retriever: str,
                  preset: str | None = None, params: dict[str, Any] | None = None,
                  extra: dict[str, Any] | None = None) -> Path:
    """Write `program`'s state and its recipe to `path` (.json); a LoRA adapter its predictors
    answer through is copied beside it and recorded with its size and hash."""
    path = Path(path)
    if path.suffix != ".json":
        raise CompiledProgramError(f"compiled programs are saved as .json, not {path.suffix or 'no suffix'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    adapter = save_adapter(program, path.parent)
    yes_no = yes_no_record(program)
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
    if yes_no is not None:
        state["treeqa"]["yes_no"] = yes_no
    path.write_text(json.dumps(state, indent=2, ensure_ascii=False))
    return path


def _endpoint(configured, reader_model: str | None) -> tuple[bool, bool]:
    """(the configured LM is an endpoint's, that endpoint serves the adapter): with `reader_model`
    named, no local model is needed for the reader, nor loaded."""
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine
    from treeqa.lm import is_embedded

    remote = configured is not None and not is_embedded(configured) and bool(configured.kwargs.get("api_base"))
    return remote, remote and reader_model is not None


def load_program(path: str | Path | CompiledFile, retriever=None, expect: str | None = None,
                 overrides: dict[str, Any] | None = None, reader_model: str | None = None) -> dspy.Module:
    """A ready-to-call compiled program.

    Args:
        path: a file written by `treeqa optimize` (or `save_compiled`), or that file as
            `CompiledFile.read` read it (a command reads its file once and passes it along).
        retriever: the retriever to search with; by default the index of the dataset the
            program was compiled on, loaded from the cache dir (built if missing).
        expect: the program name the caller wants ("tor", "beam", ...); a file holding
            another program is an error.
        overrides: settings to run with in place of the stored ones (e.g. the beam's
            `pick="vote"`); an unknown one is an error, as when building the program.
        reader_model: for a file with a LoRA adapter when the configured LM (`dspy.configure`,
            before this call) is an endpoint: the model name that endpoint serves the adapter
            under; its predictors then ask that model. Without it such a load is an error, never
            a program that mixes the endpoint with a local reader.

    Example:
        >>> program = load_program("runs/optimize/tor/compiled.json")
        >>> dspy.configure(lm=get_lm("local"))
        >>> program(question="Who wrote Hamlet?").answer
    """
    from treeqa.programs import build_program, uses_retriever  # (inside: treeqa.programs discovers this package)

    compiled = path if isinstance(path, CompiledFile) else CompiledFile.read(path)
    path, name = compiled.path, compiled.program
    if expect is not None and expect != name:
        raise CompiledProgramError(f"{path} holds a compiled {name!r} program, not {expect!r}")
    params, preset = compiled.build_settings()
    params.update(overrides or {})
    configured = dspy.settings.lm
    remote, served = _endpoint(configured, reader_model)
    if compiled.adapter is not None and remote and not reader_model:
        raise CompiledProgramError(f"{path}: {ENDPOINT_NEEDS_READER_MODEL}")
    adapter = recorded_adapter_of(compiled, against_base=not served)  # refused before an index is built for it
    if retriever is None and uses_retriever(name, params, preset):
        # late: tests replace treeqa.retrievers.get_retriever; programs never import a retriever kind
        from treeqa.retrievers import get_retriever

        retriever = get_retriever(compiled.dataset, compiled.retriever, corpus=compiled.corpus)
    program = build_program(name, retriever, preset=preset, **params)
    _load_state(program, compiled, overrides=bool(overrides))
    if adapter is not None and served:  # no local model is loaded, or needed, for the reader
        serve_adapters_from(program, configured, reader_model, cache=configured.cache, names=adapter[1])
    elif adapter is not None:
        attach_adapter(program, *adapter, path=path)
        if reader_model and configured is None:
            raise CompiledProgramError(f"{path}: reader_model names a model on an endpoint; configure that "
                                       "endpoint first (dspy.configure(lm=...)) so its address is known")
        if configured is not None:
            try:
                run_adapters_with(program, configured, cache=configured.cache, reader_model=reader_model)
            except ValueError as exc:
                raise CompiledProgramError(f"{path}: {exc}") from None
    return _calibrated(program, compiled.yes_no, path)


def _load_state(program: dspy.Module, compiled: CompiledFile, overrides: bool) -> None:
    """The file's trusted state into `program`; under overrides, a predictor the file lacks (a
    setting that adds one, as expansion=bridge on a linked file) starts zero-shot, logged."""
    path = compiled.path
    state = trusted_state(program, compiled.state, path)
    if overrides:
        added = {n: p.dump_state() for n, p in program.named_predictors() if n not in compiled.state}
        if added:
            log.info("%s: %s not in the file, zero-shot under the overrides", path, ", ".join(sorted(added)))
        state.update(added)
    try:
        program.load_state(state)
    except (KeyError, TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{path}: its state does not fit a {compiled.program!r} program with these "
                                   f"settings ({type(exc).__name__}: {exc})") from exc


def _calibrated(program: dspy.Module, record: Any, path: Path) -> dspy.Module:
    """The program with the file's yes/no calibration (if it has one) on its reader, or a clear
    error for a record that is not one."""
    if record is None:
        return program
    try:
        bias = float(record["bias"])
        if not math.isfinite(bias) or not isinstance(record["predictors"], list):
            raise ValueError("a finite bias and a list of predictors")
        calibrate_yes_no(program, record["predictors"], bias)
    except (KeyError, TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{path}: its yes_no calibration is not usable ({type(exc).__name__}: {exc})") \
            from None
    return program
