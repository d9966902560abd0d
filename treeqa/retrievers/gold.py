"""Gold retrieval (`--retriever gold`): a benchmark question's own gold paragraphs, as if a search
had found them all and nothing else.

What a reader scores on them is its reading alone; the gap to the same program with a real
retriever, on the same questions, is what retrieval costs. It answers only the dataset's own
questions, asked as they are written (rta searches with the question): a program that writes
its own queries is refused at its first search, not given paragraphs it did not find.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from treeqa.data import SPLITS, DataError, load_split
from treeqa.data.corpus import Passage
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.indexed import RETRIEVERS


def question_key(question: str) -> str:
    return " ".join(question.split()).lower()


class GoldRetriever(Retriever):
    """The gold paragraphs of each question in `gold` (question key -> passage ids), in the
    dataset's own order, at most k."""

    kind = "gold"

    def __init__(self, passages: list[Passage], gold: dict[str, list[str]]):
        self.passages = passages
        self.by_id = {p.id: p for p in passages}
        self.gold = gold

    @classmethod
    def for_corpus(cls, passages: list[Passage], index_root: Path, name: str, build: bool = True) -> GoldRetriever:
        """The gold paragraphs of every question of every split of the dataset found here."""
        dataset = name.removesuffix("+wiki")
        gold: dict[str, list[str]] = {}
        for split in SPLITS.get(dataset, {}):
            try:
                examples = load_split(dataset, split)
            except DataError:  # a split this machine does not have: its questions are not asked here
                continue
            for ex in examples:
                gold.setdefault(question_key(ex.question), list(ex.get("gold_ids") or []))
        if not any(gold.values()):
            raise DataError(f"{dataset}: no question has gold paragraphs, so gold retrieval has nothing to give")
        return cls(passages, gold)

    @classmethod
    def for_entry(cls, entry: dict[str, Any], index_root: Path, name: str, build: bool = True) -> GoldRetriever:
        raise DataError(f"corpus {name!r}: gold retrieval reads a benchmark's own gold paragraphs; "
                        "a corpus of your own has none")

    @classmethod
    def index_file(cls, path: Path, index_root: Path, name: str, chunk_words: int | None, **options: Any):
        raise DataError("gold retrieval has no index to build: it reads a benchmark's gold paragraphs")

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        self._check(queries, k)
        return [self._gold_of(query)[:k] for query in queries]

    def _gold_of(self, query: str) -> list[Passage]:
        ids = self.gold.get(question_key(query))
        if ids is None:
            raise ValueError(f"gold retrieval knows only the dataset's own questions, asked as written; "
                             f"not {query[:80]!r} (a program that writes its own queries cannot use it)")
        found = [self.by_id[i] for i in ids if i in self.by_id]
        if not found:
            raise ValueError(f"no gold paragraph of {query[:80]!r} is in the corpus")
        return found


RETRIEVERS.register(GoldRetriever.kind, GoldRetriever)
