"""The QA programs, by the short names the command line uses."""

from __future__ import annotations

from typing import Any

import dspy

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


def uses_retriever(name: str, params: dict[str, Any] | None = None, preset: str | None = None) -> bool:
    """Whether program `name` with these settings searches a corpus (so an index is needed)."""
    params = params or {}
    if name == "beam":
        evidence = params.get("evidence", BEAM_PRESETS[preset]["evidence"] if preset else "retrieval")
        return evidence == "retrieval"
    return name in ("tor", "cor", "rta")


def build_program(name: str, retriever: Retriever | None = None, preset: str | None = None,
                  **params: Any) -> dspy.Module:
    """A fresh, zero-shot program. `preset` (beam only) picks the paper's NQ/TriviaQA/WebQ settings."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown program {name!r}; choose one of {', '.join(PROGRAMS)}")
    if preset is not None:
        if name != "beam":
            raise ValueError(f"presets are for the beam program, not {name!r}")
        return BeamSearchQA.preset(preset, retriever, **params)
    return PROGRAMS[name](retriever, **params)


__all__ = ["BEAM_PRESETS", "PROGRAMS", "BeamSearchQA", "ChainOfReviews", "ChainOfThoughtAnswer", "DirectAnswer",
           "GenRead", "RetrieveThenAnswer", "TreeOfReviews", "build_program", "program_name", "uses_retriever"]
