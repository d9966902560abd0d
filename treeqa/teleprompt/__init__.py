"""The compilers `optimize` offers, one file each, found by the registry (`base.register`).

A new compiler is one new file in this package that registers itself; `compilers()` finds them
by the registries' one rule (`treeqa.registry.discover`: every module here, then those
TREEQA_COMPILERS names), lazily, on first use, so DSPy's teleprompters load only when needed.
The EM metrics are in `metrics`.
"""

from __future__ import annotations

from treeqa.registry import Registry, discover
from treeqa.teleprompt.base import COMPILERS, CompileContext, Compiler, register

_loaded = False


def compilers(refresh: bool = False) -> Registry[Compiler]:
    """Every registered compiler, by name (discovered on first use, or again with `refresh`): a
    mapping, whose `lookup` names every `--optimizer` for an unknown one."""
    global _loaded
    if refresh or not _loaded:
        discover("compilers", __name__)
        _loaded = True
    return COMPILERS


def __getattr__(name: str):
    if name in ("RecordedReader", "reader_of", "record_reads"):
        # on first use: importing the package does not import DSPy's teleprompters
        from treeqa.teleprompt import recorded

        return getattr(recorded, name)
    raise AttributeError(name)


__all__ = ["COMPILERS", "CompileContext", "Compiler", "RecordedReader", "compilers", "reader_of", "record_reads",
           "register"]
