"""The benchmarks, one file each: its file layouts (parsers), its splits and evaluation split, its
corpus, its Hugging Face hub converter and its official source (`treeqa data get`).

A new dataset is one file: put it here, or anywhere importable and named in TREEQA_DATASETS;
`discover` (the registries' one rule, `treeqa.registry.discover`) imports both.
"""

from __future__ import annotations

from treeqa.registry import discover as _discover


def discover() -> None:
    """Register every dataset of this package and of the modules TREEQA_DATASETS names."""
    _discover("datasets", __name__)
