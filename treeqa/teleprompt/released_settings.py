"""`--optimizer released-settings`: the search settings a priced settings search chose once, read
from its committed record and applied without running the search again.

Why: the priced settings search (`settings --max-cost-ratio R`) runs every candidate on train
questions, hours on 2 cores: too long for a default compile. It was run once, with the released
reader, on that reader's validation questions (held out of its training, so its EM there is not
inflated), beside rta on the same questions and machine; `benchmarks/released_settings.py` writes
the record (`released/<program>.json`) from those runs' summaries. This compiler applies the
choice and records the search in compiled.json as `settings_search`, as the live search does, with
the record's figures: the EM and seconds of every candidate and the budget it was chosen within.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt.teleprompt import Teleprompter

from treeqa.programs import build_program, program_name
from treeqa.teleprompt.base import Compiler, register

RELEASED_SETTINGS_DIR = Path(__file__).parent / "released"


def released_settings(program: str, folder: Path | None = None) -> dict[str, Any] | None:
    """The record of the priced search released for `program`, or None where none was."""
    path = (folder or RELEASED_SETTINGS_DIR) / f"{program}.json"
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record["chosen"], dict) or record["program"] != program:
            raise ValueError(f"it names {record['program']!r} and chose {record['chosen']!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a released settings record ({type(exc).__name__}: {exc})") from None
    return record


def rebuilt_with(student: dspy.Module, changes: dict[str, Any], fresh: tuple[str, ...] = ()) -> dspy.Module:
    """The student rebuilt with `changes` to its settings: every predictor it still has keeps its
    state (demos, instructions) but those named in `fresh`, which start zero-shot, and what earlier
    stages recorded of their fits (`judge_fit`, `settings_search`, ...) is carried over."""
    if all(student.settings.get(k) == v for k, v in changes.items()):
        program = student
    else:
        program = build_program(program_name(student), getattr(student, "retriever", None),
                                **{**student.settings, **changes})
        kept = dict(student.named_predictors())
        for name, predictor in program.named_predictors():
            if name in kept and name not in fresh:
                predictor.load_state(kept[name].dump_state())
        for name, value in vars(student).items():
            if name.endswith("_fit") or name == "settings_search":
                setattr(program, name, value)
    for name, predictor in program.named_predictors():
        if name in fresh:
            predictor.demos = []
    return program


class ReleasedSettings(Teleprompter):
    """Apply the settings `released/<program>.json` records (see the module doc)."""

    def __init__(self, folder: Path | None = None):
        super().__init__()
        self.folder = folder

    def compile(self, student: dspy.Module, *, trainset=None, **kwargs) -> dspy.Module:
        name = program_name(student)
        record = released_settings(name, self.folder)
        if record is None:
            raise ValueError(f"{name} has no released settings (treeqa/teleprompt/released/{name}.json); "
                             "--optimizer settings --max-cost-ratio R searches them on train")
        program = rebuilt_with(student, record["chosen"])
        program.settings_search = {"released": f"{name}.json", "chosen": dict(record["chosen"]),
                                   "tried": record["tried"], "budget": record["budget"],
                                   "sample": record["sample"], "reader_sha256": record.get("reader_sha256")}
        program._compiled = True
        return program


register(Compiler("released-settings", lambda c: (ReleasedSettings(), {}), lambda per_q, n, t: 0, preparer=True,
                  settings_only=True, from_annotations=True, fits=lambda cls: released_settings(cls.name) is not None,
                  sets=lambda cls, settings: dict(released_settings(cls.name)["chosen"]),
                  unfit="has no released settings (a priced search recorded in treeqa/teleprompt/released/)"))
