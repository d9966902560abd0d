"""The compilers `optimize` offers, one file each, found by the registry (`base.register`).

A new compiler is one new file in this package that registers itself; `compilers()` imports
every module here once, so nothing else needs to name it. The EM metrics are in `metrics`.
"""

from __future__ import annotations

import importlib
import pkgutil

from treeqa.registry import Registry
from treeqa.teleprompt.base import COMPILERS, CompileContext, Compiler, register

_loaded = False


def compilers() -> Registry[Compiler]:
    """Every registered compiler, by name (the package's modules imported on first use): a
    mapping, whose `lookup` names every `--optimizer` for an unknown one."""
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True
    return COMPILERS


def __getattr__(name: str):  # RecordedReader & co. without importing DSPy's teleprompters at package import
    if name in ("RecordedReader", "reader_of", "record_reads"):
        from treeqa.teleprompt import recorded

        return getattr(recorded, name)
    raise AttributeError(name)


__all__ = ["COMPILERS", "CompileContext", "Compiler", "RecordedReader", "compilers", "reader_of", "record_reads",
           "register"]
