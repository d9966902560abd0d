"""A compiled program's LoRA adapter: copied beside the file when saved, checked (record, then
tensors against the base model) before anything is loaded for it, given to the predictors it
was trained for, and held to the run's LM and cache."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy

from treeqa.programs.compiled.file import CompiledFile, CompiledProgramError
from treeqa.programs.compiled.yes_no import YesNoCalibratedPredict


def adapter_lms(program: dspy.Module) -> dict[str, Path]:
    """Predictor name -> the LoRA adapter its own LM adds to the embedded model (those that have one)."""
    out = {}
    for name, predictor in program.named_predictors():
        adapter = getattr(predictor.lm, "adapter", None) if predictor.lm is not None else None
        if adapter is not None:
            out[name] = Path(adapter)
    return out


def save_adapter(program: dspy.Module, folder: Path) -> dict[str, Any] | None:
    """Copy the program's adapter beside the compiled file and describe it (one adapter a program)."""
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine and base hash
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


def recorded_adapter_of(compiled: CompiledFile, against_base: bool = True) -> tuple[Path, tuple[str, ...]] | None:
    """(verified adapter file, predictors) of a compiled file that records one: its size and hash
    match the record, and its tensors fit the base model (`treeqa.lm.adapter.recorded_adapter`);
    its errors as CompiledProgramError."""
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine and base hash
    from treeqa.lm.adapter import AdapterError, recorded_adapter

    if compiled.adapter is None:
        return None
    try:
        return recorded_adapter({"adapter": compiled.adapter}, compiled.folder, str(compiled.path), against_base)
    except AdapterError as exc:
        raise CompiledProgramError(str(exc)) from None


def attach_adapter(program: dspy.Module, adapter: Path, predictors, path: Path | str = "", cache: bool = True) -> None:
    """Give the named predictors the embedded model with `adapter` added (their own LM)."""
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine and base hash
    from treeqa.lm.adapter import AdapterError, attach

    try:
        attach(program, adapter, predictors, cache=cache, where=str(path))
    except AdapterError as exc:
        raise CompiledProgramError(str(exc)) from None


ENDPOINT_NEEDS_READER_MODEL = ("this compiled program answers through a LoRA adapter (its reader); on an "
                               "endpoint, serve the adapter (llama.cpp server --lora, vLLM --enable-lora "
                               "--lora-modules NAME=DIR) and name that model with --reader-model "
                               "(load_program(..., reader_model=NAME)), or run it with --lm local")


def run_adapters_with(program: dspy.Module, lm, cache: bool, reader_model: str | None = None) -> None:
    """Fit a program's adapter predictors to the run's LM and cache, as every command must: on the
    embedded model they answer through the adapter, with `--no-cache` reaching them too; on an
    endpoint they ask `reader_model`, the model the endpoint serves the adapter under, and without
    one the run is refused (the endpoint would answer only the other predictors)."""
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine and base hash
    from treeqa.lm import is_embedded

    if not adapter_lms(program):
        return
    if is_embedded(lm):
        set_adapter_cache(program, cache)
        return
    if not reader_model:
        raise ValueError(ENDPOINT_NEEDS_READER_MODEL)
    serve_adapters_from(program, lm, reader_model, cache)


class TrainedPromptPredict(dspy.Predict):
    """A predictor whose LoRA adapter an endpoint serves: asked in the prompt the adapter was
    trained in (the JSON adapter's, as on the embedded model), whatever adapter the run uses for
    the other predictors (DSPy's chat adapter on an endpoint). Swapped in as the predictor's class,
    so its signature, demos and state stay as they are."""

    def forward(self, **kwargs):
        with dspy.context(adapter=_trained_prompt()):
            return super().forward(**kwargs)

    async def aforward(self, **kwargs):
        with dspy.context(adapter=_trained_prompt()):
            return await super().aforward(**kwargs)


class ServedYesNoCalibratedPredict(TrainedPromptPredict, YesNoCalibratedPredict):
    """The reader an endpoint serves (asked in its trained prompt), its yes/no calibrated."""


TrainedPromptPredict.with_yes_no = ServedYesNoCalibratedPredict  # what calibrate_yes_no turns it into


def _trained_prompt() -> dspy.Adapter:
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine and base hash
    from treeqa.lm import TrainableJSONAdapter

    return TrainableJSONAdapter()


def serve_adapters_from(program: dspy.Module, lm, reader_model: str, cache: bool = True,
                        names: Sequence[str] | None = None) -> list[str]:
    """The predictors that answer through the adapter ask `reader_model` on `lm`'s endpoint (its
    api_base and key) instead, in the prompt the adapter was trained in; returns their names."""
    # late: the LM door (treeqa.lm) is read at call time, where tests and apps replace its engine and base hash
    from treeqa.lm import get_lm

    served = get_lm(reader_model, api_base=lm.kwargs.get("api_base"), api_key=lm.kwargs.get("api_key"), cache=cache)
    names = sorted(names if names is not None else adapter_lms(program))  # names: a reader not yet attached
    for name, predictor in program.named_predictors():
        if name in names:
            predictor.lm = served
            if type(predictor) is dspy.Predict:
                predictor.__class__ = TrainedPromptPredict
            elif type(predictor) is YesNoCalibratedPredict:
                predictor.__class__ = TrainedPromptPredict.with_yes_no
    return names


def set_adapter_cache(program: dspy.Module, cache: bool) -> None:
    """Turn DSPy's cache on or off for the predictors that run through an adapter (as the run's
    own LM is: `--no-cache` must reach them too)."""
    for _, predictor in program.named_predictors():
        if getattr(predictor.lm, "adapter", None) is not None and predictor.lm.cache != cache:
            predictor.lm = predictor.lm.copy(cache=cache)
