"""The QA programs, by the short names the command line uses.

A program is one file: a `QAProgram` subclass that sets `name` (see `contract.py`), registered
when its class is defined. `discover` (the registries' one rule, `treeqa.registry.discover`)
imports every module of this package, so a file added to it is registered; programs kept
elsewhere are registered by naming their modules in the TREEQA_PROGRAMS environment variable
(comma-separated importable names). Everything else (the
command line, runs, plans, compiled files, the page, the annotated demos) reads the class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from treeqa.programs.baselines import ChainOfThoughtAnswer, DirectAnswer, GenRead, RetrieveThenAnswer
from treeqa.programs.beam_search import PRESETS as BEAM_PRESETS
from treeqa.programs.beam_search import BeamSearchQA
from treeqa.programs.chain_of_reviews import ChainOfReviews
from treeqa.programs.contract import REGISTRY, QAProgram
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.registry import Registry
from treeqa.registry import discover as _discover
from treeqa.retrievers.base import Retriever

PLUGINS_VARIABLE = "TREEQA_PROGRAMS"


def discover(plugins: str | None = None) -> None:
    """Register every program of this package and of the modules `plugins` (comma-separated;
    default: those TREEQA_PROGRAMS names)."""
    _discover("programs", __name__, None if plugins is None else [m.strip() for m in plugins.split(",") if m.strip()])


discover()
PROGRAMS: Registry[type[QAProgram]] = REGISTRY  # name -> class, every registered program (live, read as a mapping)
PRESET_NAMES: tuple[str, ...] = tuple(dict.fromkeys(p for cls in PROGRAMS.values() for p in cls.presets))
DEFAULT_PROGRAM = "tor"  # what `serve` and `optimize` run when no program is named
SIMPLEST = "direct"  # what `ask` runs when none is named: one LM call, no index (checks the LM works)
BASELINE = "rta"  # one retrieval: what a search is paired with by default in comparisons
COMPARED = ("direct", "rta", "beam", "tor")  # `treeqa compare`'s default line-up


def program_name(program: QAProgram) -> str:
    """The registry name of a program instance's class."""
    for name, cls in PROGRAMS.items():
        if type(program) is cls:
            return name
    raise ValueError(f"{type(program).__name__} is not a registered program")


def check_names(name: str, preset: str | None = None) -> None:
    """A clear error for an unknown program or preset, before anything is built or written."""
    PROGRAMS.lookup(name)  # an unknown name: ValueError naming every program
    if preset is not None:
        presets = PROGRAMS[name].presets
        if not presets:
            with_presets = [n for n, cls in PROGRAMS.items() if cls.presets]
            raise ValueError(f"presets are for the {', '.join(with_presets)} program, not {name!r}")
        if preset not in presets:
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(presets)}")


def validate_params(name: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The given settings of program `name`, checked and converted (see `QAProgram.check_settings`)."""
    check_names(name)
    return PROGRAMS[name].check_settings(params, name)


@dataclass(frozen=True)
class ProgramSpec:
    """A program resolved once: its class, its settings checked and resolved, and what they
    decide (whether it searches a corpus, its call bound). Built at the door by
    `resolve_program` and passed along, so nothing downstream checks the names again."""

    name: str
    cls: type[QAProgram]
    preset: str | None
    params: dict[str, Any]  # the settings given (the preset's not included), checked and converted
    settings: dict[str, Any]  # every setting it runs with: the preset's, then `params`, then the defaults

    @property
    def needs_retriever(self) -> bool:
        return self.cls.needs_retriever(self.settings)

    @property
    def call_bound(self) -> int:
        """The most LM calls one question can take (see `QAProgram.call_bound`)."""
        return self.cls.call_bound(self.settings)

    def build(self, retriever: Retriever | None = None, embed_fn=None, **more: Any) -> QAProgram:
        """A fresh, zero-shot program; `more` settings (checked) are added to the given ones."""
        spec = resolve_program(self.name, {**self.params, **more}, self.preset) if more else self
        settings = {**(self.cls.presets[self.preset] if self.preset else {}), **spec.params}
        if embed_fn is not None:
            settings["embed_fn"] = embed_fn
        return self.cls(retriever, **settings)


def resolve_program(name: str, params: dict[str, Any] | None = None, preset: str | None = None) -> ProgramSpec:
    """Program `name` with these settings and preset, checked once: an unknown name or preset
    and every bad setting fail here with a clear error, before anything is built or written."""
    check_names(name, preset)
    cls = PROGRAMS[name]
    given = cls.check_settings(params, name)
    settings = cls.resolve_settings({**(cls.presets[preset] if preset else {}), **given})
    return ProgramSpec(name, cls, preset, given, settings)


def resolve_settings(name: str, params: dict[str, Any] | None = None, preset: str | None = None) -> dict[str, Any]:
    """Every setting program `name` would run with: the preset's, overridden by `params`, the
    rest at their defaults. Nothing is built, so this is what plans and checks use."""
    return resolve_program(name, params, preset).settings


def uses_retriever(name: str, params: dict[str, Any] | None = None, preset: str | None = None) -> bool:
    """Whether program `name` with these settings searches a corpus (so an index is needed)."""
    return resolve_program(name, params, preset).needs_retriever


def call_bound(name: str, params: dict[str, Any] | None = None, preset: str | None = None) -> int:
    """The most LM calls one question can take (see `QAProgram.call_bound`)."""
    return resolve_program(name, params, preset).call_bound


def build_program(name: str, retriever: Retriever | None = None, preset: str | None = None,
                  **params: Any) -> QAProgram:
    """A fresh, zero-shot program. `preset` (beam only) picks the paper's NQ/TriviaQA/WebQ settings."""
    embed_fn = params.pop("embed_fn", None)
    return resolve_program(name, params, preset).build(retriever, embed_fn=embed_fn)


__all__ = ["BASELINE", "BEAM_PRESETS", "COMPARED", "DEFAULT_PROGRAM", "PRESET_NAMES", "PROGRAMS", "SIMPLEST",
           "BeamSearchQA", "ChainOfReviews", "ChainOfThoughtAnswer", "DirectAnswer", "GenRead", "QAProgram",
           "ProgramSpec", "RetrieveThenAnswer", "TreeOfReviews", "build_program", "call_bound", "check_names",
           "discover", "program_name", "resolve_program", "resolve_settings", "uses_retriever", "validate_params"]
