"""The retrieval doubles: a fake retriever (deterministic search without an index) and the
stand-in encoder.

`hashing_embed` stands in for MiniLM: the autouse fixture of `tests/conftest.py` makes it what
a program embeds with by default in every fast test (integration tests keep the real encoder).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from treeqa.data.corpus import Passage
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.encoder import EmbedFn
from treeqa.retrievers.streaming import DIM as ENCODER_DIM  # MiniLM's width, which an index build checks

# --- the retriever ----------------------------------------------------------------------------

def passage(title: str, text: str | None = None) -> Passage:
    return Passage(id=title.lower(), title=title, text=text or f"Facts about {title}.")


class FakeRetriever(Retriever):
    """Deterministic search without an index; every query is recorded in `queries` as (query, k).

    naming="query": k passages named after the query ("<query>|<i>", titled "<query> title <i>"),
        so a test sees what was found for what; with `shared_id` every query also finds the
        same passage ("common") first.
    naming="counter": fresh paragraphs titled N1, N2, ... (the same ones when a query is asked
        again), so a tree's paragraphs are told apart by number.
    `fixed` gives chosen results for chosen queries, in either mode.
    """

    def __init__(self, naming: str = "query", fixed: dict[str, list[Passage]] | None = None,
                 shared_id: bool = False):
        if naming not in ("query", "counter"):
            raise ValueError(f"naming is 'query' or 'counter', got {naming!r}")
        self.naming, self.fixed, self.shared_id = naming, fixed or {}, shared_id
        self.queries: list[tuple[str, int]] = []
        self._made: dict[str, list[Passage]] = {}
        self._count = 0

    @property
    def asked(self) -> list[str]:
        return [q for q, _ in self.queries]

    def search_batch(self, queries, k):
        self._check(queries, k)
        out = []
        for q in queries:
            self.queries.append((q, k))
            if q in self.fixed:
                out.append(self.fixed[q][:k])
            elif self.naming == "counter":
                made = self._made.setdefault(q, [])
                while len(made) < k:
                    self._count += 1
                    made.append(passage(f"N{self._count}"))
                out.append(made[:k])
            else:
                hits = [Passage(f"{q}|{i}", f"{q} title {i}", f"text {i} about {q}", 1.0 - i / 10) for i in range(k)]
                if self.shared_id:
                    hits[0] = Passage("common", "Common", "text 0 about common")
                out.append(hits)
        return out


# --- the stand-in encoder ----------------------------------------------------------------------

def hashing_embed(texts: list[str]) -> np.ndarray:
    """The one stand-in for MiniLM: a bag of words, each word (lower-cased) hashed into one of 384
    buckets; L2-normalised float32 rows (a text without words is a zero row). Deterministic
    across runs, and texts that share words are similar."""
    out = np.zeros((len(texts), ENCODER_DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % ENCODER_DIM] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def hashing_embed_counting(calls: list[int]) -> EmbedFn:
    """`hashing_embed` that appends the size of each batch it is given to `calls`."""

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return hashing_embed(texts)

    return embed
