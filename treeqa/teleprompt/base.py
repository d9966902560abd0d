"""What a compiler declares, and the registry `optimize` reads (shaped like the program contract).

A compiler is one file in `treeqa/teleprompt/` that calls `register(Compiler(...))`: its name,
how to build its teleprompter, the most LM calls it makes, whether it prepares a program from
the annotations or settings (so an EM teleprompter can run after it), and which programs it fits.
`optimize` has no branch per compiler: it reads these declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from treeqa.registry import Registry


@dataclass(frozen=True)
class CompileContext:
    """What building a teleprompter may use: the optimize spec, the LMs and the run folder."""

    spec: Any  # treeqa.optimize.OptimizeSpec
    task_lm: dspy.LM
    teacher_lm: dspy.LM | None = None
    out_dir: Path | None = None

    @property
    def tuning(self) -> dict[str, int]:
        return self.spec.tuning()

    @property
    def teacher(self) -> dict | None:
        """DSPy's `teacher_settings`: the teacher LM where one is given."""
        return {"lm": self.teacher_lm} if self.teacher_lm is not None else None

    @property
    def proposer(self) -> dspy.LM:
        """The LM that proposes instructions: the teacher, else the task LM."""
        return self.teacher_lm or self.task_lm


@dataclass(frozen=True)
class Compiler:
    """One `--optimizer`.

    Args:
        name: what `--optimizer` calls it.
        build: context -> (teleprompter, keyword arguments for its `compile`).
        call_bound: (LM calls per question, train questions, tuning) -> the most LM calls it makes.
        preparer: it prepares a program from annotations or settings; an EM teleprompter may follow.
        needs_annotations: the train questions must carry annotated gold paragraphs.
        from_annotations: it never runs the program on the train questions (it learns from their
            annotations alone, or, like the trained reader, not from them at all), so those may come
            from another dataset (`--train-from`), whose paragraphs the evaluation corpus does not hold.
        holds_out: it scores candidates on a held-out part of train (passed as `valset`).
        fits: program class -> whether it can compile that program.
        unfit: why it cannot, as "<program> ..." continues (e.g. "has no path judge").
        refuses: (program class, resolved settings) -> why it cannot compile the program with these
            settings (e.g. a path judge with no passages to judge), or None; checked with the spec,
            before any question is asked.
        train_seconds: (train questions, the optimize spec) -> the seconds its weight training
            takes (measured), for a compiler that trains weights; `--plan` adds it up.
        settings_only: a preparer that only changes the program's settings (its predictors' state
            and earlier fits kept), so it may follow another preparer.
        weights: it trains the model's weights and returns a program an EM teleprompter may
            compile further (it sits between a preparer and a teleprompter: `path-judge+finetune+reader`).
        sets: (program class, settings) -> the settings it will set that are known before it runs
            (a judge's presence, a released choice, a reading), so `--plan` bounds the compiled
            side with the program the compile writes, not the zero-shot one.
    """

    name: str
    build: Callable[[CompileContext], tuple[Any, dict[str, Any]]]
    call_bound: Callable[[int, int, dict[str, int]], int]
    preparer: bool = False
    needs_annotations: bool = False
    from_annotations: bool = False
    holds_out: bool = False
    fits: Callable[[type], bool] = lambda cls: True
    unfit: str = "cannot be compiled this way"
    refuses: Callable[[type, dict[str, Any]], str | None] = lambda cls, settings: None
    train_seconds: Callable[[int, Any], float] | None = None
    weights: bool = False
    settings_only: bool = False
    sets: Callable[[type, dict[str, Any]], dict[str, Any]] | None = None


COMPILERS: Registry[Compiler] = Registry("optimizer")  # `--optimizer` name -> compiler


def register(compiler: Compiler) -> Compiler:
    """Add a compiler to the registry (a file in this package calls it at import); a name
    another compiler holds is refused."""
    if "+" in compiler.name or not compiler.name:
        raise ValueError(f"a compiler's name cannot be empty or hold '+': {compiler.name!r}")
    return COMPILERS.register(compiler.name, compiler)
