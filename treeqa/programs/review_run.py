"""The records of one ToR or CoR search (its nodes, its evidence pool) and the rankings read off
them: what both review programs fill and read, kept apart from the programs themselves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from treeqa.data.answers import RECALL_K
from treeqa.data.corpus import Passage
from treeqa.programs.common import emit
from treeqa.retrievers.encoder import EmbedFn, default_embed
from treeqa.signatures.fusion import Evidence
from treeqa.signatures.review import ReviewOutcome


def rank_retrieved(evidence: Sequence[Evidence], retrieved: Sequence[Passage], answer: str,
                   relevant_ids: Sequence[str] = (), embed_fn: EmbedFn | None = None,
                   k: int = RECALL_K) -> list[Passage]:
    """Every distinct retrieved paragraph, ordered so the first `k` are the program's best.

    Tiers: paragraphs of the evidence pool, then those a review judged relevant, then the
    rest (each tier in discovery order). Only when there are more than `k` paragraphs does
    the order within tiers matter; then, as the paper does, pieces of evidence are re-ranked
    by the similarity of their text (analysis and paragraphs) to the final answer, and the
    other tiers' paragraphs by their own similarity to it.

    Args:
        evidence: the evidence pool, in the order it was filled.
        retrieved: every paragraph retrieved, in discovery order (duplicates allowed).
        answer: the final answer; when empty there is nothing to re-rank by.
        relevant_ids: ids of paragraphs some review judged relevant.
        embed_fn: texts -> L2-normalised vectors (default: the dense retriever's encoder).
        k: the cut-off the ranking serves (recall@15 in the paper).
    """
    by_id: dict[str, Passage] = {}
    for p in [p for e in evidence for p in e.passages] + list(retrieved):
        by_id.setdefault(p.id, p)
    relevant = set(relevant_ids)
    in_pool = {p.id for e in evidence for p in e.passages}
    middle = [p for p in by_id.values() if p.id in relevant and p.id not in in_pool]
    rest = [p for p in by_id.values() if p.id not in relevant and p.id not in in_pool]
    pieces = list(evidence)

    if len(by_id) > k and answer.strip():
        embed_fn = embed_fn or default_embed
        piece_texts = [" ".join([e.analysis, *(p.as_text() for p in e.passages)]) for e in pieces]
        other_texts = [p.as_text() for p in middle + rest]
        vectors = np.asarray(embed_fn([answer, *piece_texts, *other_texts]), dtype=np.float32)
        sims = vectors[1:] @ vectors[0]
        piece_sims, other_sims = sims[:len(pieces)], sims[len(pieces):]
        pieces = [pieces[i] for i in sorted(range(len(pieces)), key=lambda i: -piece_sims[i])]
        sim_of = {p.id: float(s) for p, s in zip(middle + rest, other_sims, strict=True)}
        middle = sorted(middle, key=lambda p: -sim_of[p.id])
        rest = sorted(rest, key=lambda p: -sim_of[p.id])

    ranked: dict[str, Passage] = {}
    for e in pieces:
        for p in e.passages:
            ranked.setdefault(p.id, by_id[p.id])
    for p in middle + rest:
        ranked.setdefault(p.id, p)
    return list(ranked.values())


@dataclass
class ReviewNode:
    """One node of the tree (ToR: a paragraph on a path) or one turn of the chain (CoR), as the
    search tree records it. `ids`/`titles` (CoR only) are every paragraph the turn's review saw."""

    node: int
    id: str | None = None
    title: str | None = None
    depth: int = 0
    parent: int | None = None
    retrieved_by: str | None = None
    action: str | None = None  # reject / search / accept, or "pruned" (repetitive pruning)
    relevant: bool | None = None
    sufficient: bool | None = None
    corrected: bool | None = None  # the rules overrode the model's own action
    p_relevant: float | None = None  # the model's probability of its verdicts, where the LM gives it
    p_sufficient: float | None = None
    judge_relevant: float | None = None  # a compiled path judge's probabilities, where one decided
    judge_sufficient: float | None = None
    query: str = ""
    expanded: bool = False
    analysis: str = ""
    reasoning: str = ""
    failures: list[dict] = field(default_factory=list)
    ids: list[str] | None = None
    titles: list[str] | None = None

    def judged(self, outcome: ReviewOutcome) -> None:
        """Record a review's outcome on this node."""
        self.action, self.relevant, self.sufficient = outcome.action, outcome.relevant, outcome.sufficient
        self.corrected, self.analysis, self.reasoning = outcome.corrected, outcome.analysis, outcome.reasoning
        self.p_relevant = None if outcome.p_relevant is None else round(outcome.p_relevant, 4)
        self.p_sufficient = None if outcome.p_sufficient is None else round(outcome.p_sufficient, 4)
        self.judge_relevant = None if outcome.judge_relevant is None else round(outcome.judge_relevant, 4)
        self.judge_sufficient = None if outcome.judge_sufficient is None else round(outcome.judge_sufficient, 4)

    def to_dict(self) -> dict:
        """Plain JSON for the tree; keys that do not apply (never reviewed, not CoR) are left out."""
        out = asdict(self)
        for key in ("corrected", "ids", "titles", "p_relevant", "p_sufficient", "judge_relevant", "judge_sufficient"):
            if out[key] is None:
                del out[key]
        return out


@dataclass
class ReviewRun:
    """Everything one question's search produces; kept off the module so calls can run in parallel."""

    question: str
    nodes: list[ReviewNode] = field(default_factory=list)
    pool: list[Evidence] = field(default_factory=list)
    pool_nodes: list[int] = field(default_factory=list)
    pool_ids: set[str] = field(default_factory=set)
    retrieved: list[Passage] = field(default_factory=list)
    relevant_ids: dict[str, None] = field(default_factory=dict)  # an ordered set
    failures: list[dict] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("reviews", "review_failures", "completions", "completion_failures", "retrievals",
         "pruned_repetitive", "corrected", "query_fallbacks", "judge_fallbacks", "judge_only", "linked",
         "bridges", "bridge_failures"), 0))
    named_queries: set[str] = field(default_factory=set)  # queries made from a bridge entity's name
    done: bool = False

    def add_node(self, **values) -> ReviewNode:
        node = ReviewNode(node=len(self.nodes), **values)
        self.nodes.append(node)
        return node

    def done_with(self, node: ReviewNode, passages: Sequence[Passage] = ()) -> None:
        """A node is decided: tell a listener (the serving app's stream), with its paragraphs."""
        emit({"type": "node", "node": node.to_dict(),
              "passages": [{"id": p.id, "title": p.title, "text": p.text} for p in passages]})

    def add_evidence(self, passages: Sequence[Passage], analysis: str, node: int) -> None:
        self.pool.append(Evidence(tuple(passages), analysis))
        self.pool_nodes.append(node)
        self.pool_ids.update(p.id for p in passages)

    def evidence_records(self) -> list[dict]:
        return [{"node": n, "ids": [p.id for p in e.passages], "titles": [p.title for p in e.passages],
                 "analysis": e.analysis} for e, n in zip(self.pool, self.pool_nodes, strict=True)]


def search_ranking(run: ReviewRun) -> list[Passage]:
    """The paragraphs a search retrieved that are not in its evidence pool, best first: by the
    probability that the paragraph is relevant (the path judge's where one decided, else the
    model's, else its written verdict: relevant 1, unreviewed 0.5, rejected 0), ties in
    discovery order, so a search that judged nothing reads what one retrieval would."""
    score: dict[str, float] = {}
    for node in run.nodes:
        if node.id is None or node.id in score:
            continue
        p = node.judge_relevant if node.judge_relevant is not None else node.p_relevant
        if p is None:
            p = 0.5 if node.relevant is None else float(node.relevant)
        score[node.id] = p
    seen: dict[str, Passage] = {}
    for p in run.retrieved:
        if p.id not in run.pool_ids:
            seen.setdefault(p.id, p)
    order = {pid: i for i, pid in enumerate(seen)}
    return sorted(seen.values(), key=lambda p: (-score.get(p.id, 0.5), order[p.id]))
