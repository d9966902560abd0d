"""Sanitising a compiled file's untrusted state: of each predictor only the instructions, the
field prefixes and descriptions, and demos whose keys are the signature's fields are read. A
predictor's "lm" (which DSPy would turn into a client for any provider) and any other key are
dropped with a warning, so a file can never choose where prompts are sent; demos and texts are
bounded, since each demo goes into every prompt.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import dspy

from treeqa.programs.compiled.file import CompiledProgramError

_SCALARS = (str, int, float, bool, type(None))
MAX_DEMOS = 32  # per predictor
MAX_DEMO_CHARS = 20_000  # one demo, all its fields
MAX_INSTRUCTION_CHARS = 20_000

log = logging.getLogger(__name__)


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
