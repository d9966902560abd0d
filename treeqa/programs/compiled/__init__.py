"""Compiled programs on disk: DSPy's JSON state plus what it takes to rebuild the program.

The file is what `program.save("x.json")` writes (demos and instructions per predictor,
DSPy's dependency versions) with one extra key, "treeqa" (`file`: the format, read once into a
`CompiledFile`). `load_program` rebuilds that program and loads the state (`program`). A
compiled file is untrusted input: only the instructions, field texts and bounded demos of its
state are read (`trusted`), and its LoRA adapter is checked before anything is loaded for it
(`adapters`). Only JSON is read: pickled programs are refused.
"""

from treeqa.programs.compiled.adapters import (
    adapter_lms,
    attach_adapter,
    recorded_adapter_of,
    run_adapters_with,
    set_adapter_cache,
)
from treeqa.programs.compiled.file import (
    FORMAT,
    MAX_FILE_BYTES,
    CompiledFile,
    CompiledProgramError,
    read_recipe,
    read_state,
    recipe_settings,
)
from treeqa.programs.compiled.program import load_program, save_compiled
from treeqa.programs.compiled.trusted import MAX_DEMO_CHARS, MAX_DEMOS, MAX_INSTRUCTION_CHARS, trusted_state

__all__ = ["FORMAT", "MAX_DEMOS", "MAX_DEMO_CHARS", "MAX_FILE_BYTES", "MAX_INSTRUCTION_CHARS", "CompiledFile",
           "CompiledProgramError", "adapter_lms", "attach_adapter", "load_program", "read_recipe", "read_state",
           "recipe_settings", "recorded_adapter_of", "run_adapters_with", "save_compiled", "set_adapter_cache",
           "trusted_state"]
