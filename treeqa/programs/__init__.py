"""The QA programs, by the short names the command line uses."""

from __future__ import annotations

import inspect
import typing
from functools import cache
from typing import Any

import dspy
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from treeqa.programs.baselines import ChainOfThoughtAnswer, DirectAnswer, GenRead, RetrieveThenAnswer
from treeqa.programs.beam_search import PRESETS as BEAM_PRESETS
from treeqa.programs.beam_search import BeamSearchQA
from treeqa.programs.tree_of_reviews import ChainOfReviews, TreeOfReviews
from treeqa.retrievers.base import Retriever

PROGRAMS: dict[str, type[dspy.Module]] = {
    "beam": BeamSearchQA,
    "tor": TreeOfReviews,
    "cor": ChainOfReviews,
    "rta": RetrieveThenAnswer,
    "direct": DirectAnswer,
    "cot": ChainOfThoughtAnswer,
    "genread": GenRead,
}


def program_name(program: dspy.Module) -> str:
    """The registry name of a program instance's class."""
    for name, cls in PROGRAMS.items():
        if type(program) is cls:
            return name
    raise ValueError(f"{type(program).__name__} is not a registered program")


NOT_SETTINGS = ("self", "retriever", "embed_fn")  # constructor arguments that are objects, not settings


def check_names(name: str, preset: str | None = None) -> None:
    """A clear error for an unknown program or preset, before anything is built or written."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown program {name!r}; choose one of {', '.join(PROGRAMS)}")
    if preset is not None:
        if name != "beam":
            raise ValueError(f"presets are for the beam program, not {name!r}")
        if preset not in BEAM_PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(BEAM_PRESETS)}")


@cache
def settings_model(name: str) -> type[BaseModel]:
    """The settings program `name` takes, as a pydantic model read off its constructor
    (name, type, default), so command-line values, compiled files and code are checked alike."""
    check_names(name)
    cls = PROGRAMS[name]
    hints = typing.get_type_hints(cls.__init__)
    fields = {}
    for param in inspect.signature(cls.__init__).parameters.values():
        if param.name in NOT_SETTINGS or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        fields[param.name] = (hints.get(param.name, Any), param.default)
    return create_model(f"{cls.__name__}Settings", __config__=ConfigDict(extra="forbid", strict=False), **fields)


def validate_params(name: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The given settings of program `name`, type-checked and converted ("no" -> False, "2" -> 2);
    one line per bad value, naming the setting, what it needs and what it got."""
    params = {k: v for k, v in (params or {}).items() if not k.startswith("_")}  # "_compiled" etc.: bookkeeping
    model = settings_model(name)
    try:
        checked = model.model_validate(params)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(part) for part in err["loc"]) or "?"
            if err["type"] == "extra_forbidden":
                lines.append(f"{key}: not a setting of {name} (settings: {', '.join(model.model_fields)})")
            else:
                lines.append(f"{key}: {err['msg'].lower()} (given: {err.get('input')!r})")
        raise ValueError(f"bad settings for {name}:\n  " + "\n  ".join(lines)) from None
    return checked.model_dump(exclude_unset=True)


def uses_retriever(name: str, params: dict[str, Any] | None = None, preset: str | None = None) -> bool:
    """Whether program `name` with these settings searches a corpus (so an index is needed)."""
    check_names(name, preset)
    params = params or {}
    if name == "beam":
        evidence = params.get("evidence", BEAM_PRESETS[preset]["evidence"] if preset else "retrieval")
        return evidence == "retrieval"
    return name in ("tor", "cor", "rta")


def build_program(name: str, retriever: Retriever | None = None, preset: str | None = None,
                  **params: Any) -> dspy.Module:
    """A fresh, zero-shot program. `preset` (beam only) picks the paper's NQ/TriviaQA/WebQ settings."""
    check_names(name, preset)
    embed_fn = params.pop("embed_fn", None)
    params = validate_params(name, params)
    if embed_fn is not None:
        params["embed_fn"] = embed_fn
    if preset is not None:
        return BeamSearchQA.preset(preset, retriever, **params)
    return PROGRAMS[name](retriever, **params)


__all__ = ["BEAM_PRESETS", "PROGRAMS", "check_names", "settings_model", "validate_params", "BeamSearchQA",
           "ChainOfReviews", "ChainOfThoughtAnswer", "DirectAnswer",
           "GenRead", "RetrieveThenAnswer", "TreeOfReviews", "build_program", "program_name", "uses_retriever"]
