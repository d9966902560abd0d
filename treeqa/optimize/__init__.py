"""Compile a program with a DSPy teleprompter and compare it, zero-shot vs compiled, on dev:
`spec` (what a run is, checked whole, and its plan), `run` (check, compile, evaluate,
report), `report` (report.json and report.md)."""

from treeqa.optimize.run import changed_instructions, check_compiled_matches, gepa_split, run_optimize
from treeqa.optimize.spec import (
    OptimizeSpec,
    compile_call_bound,
    fitting_optimizers,
    make_teleprompter,
    max_calls_per_question,
    optimizer_names,
    plan,
    preparers,
    splits_for,
    stages,
)

__all__ = ["OptimizeSpec", "changed_instructions", "check_compiled_matches", "compile_call_bound",
           "fitting_optimizers", "gepa_split", "make_teleprompter", "max_calls_per_question", "optimizer_names",
           "plan", "preparers", "run_optimize", "splits_for", "stages"]
