"""treeqa: question answering by search (ALLIES beam search, Tree of Reviews) as DSPy programs.

Importing the package makes DSPy and LiteLLM offline and quiet before either is imported:
LiteLLM reads its cost map locally and DSPy caches under treeqa's cache dir.
"""

import os as _os

from treeqa.settings import get_settings as _get_settings

_settings = _get_settings()
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_os.environ.setdefault("DSPY_CACHEDIR", str(_settings.dspy_cache_dir))
if not _settings.allow_hub:
    _os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
_os.environ.setdefault("HF_DATASETS_CACHE", str(_settings.hf_cache_dir / "datasets"))
_os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

__version__ = "0.1.0"


def load_program(path, retriever=None, expect=None):
    """A ready compiled program from a `treeqa optimize` output file (see `treeqa.compiled`)."""
    from treeqa.compiled import load_program as _load

    return _load(path, retriever=retriever, expect=expect)
