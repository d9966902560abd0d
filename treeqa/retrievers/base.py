"""The one retrieval interface programs see: `search(query, k) -> list[Passage]`."""

from __future__ import annotations

from abc import ABC, abstractmethod

from treeqa.data.corpus import Passage


class IndexMissingError(FileNotFoundError):
    """No index on disk for this corpus; the message names the command that builds it."""


class Retriever(ABC):
    """Finds the k passages of a corpus most relevant to a query, best first."""

    passages: list[Passage]

    @abstractmethod
    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        """Results for several queries at once (one encoder pass for dense retrieval)."""

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_batch([query], k)[0]

    def __call__(self, query: str, k: int) -> list[Passage]:
        return self.search(query, k)

    @staticmethod
    def _check(queries: list[str], k: int) -> None:
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        for q in queries:
            if not isinstance(q, str) or not q.strip():
                raise ValueError("a retrieval query must be a non-empty string")
