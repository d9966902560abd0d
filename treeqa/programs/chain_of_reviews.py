"""Chain of Reviews (CoR; Li et al., "Tree of Reviews", Sec. 4.4), ToR's chain baseline, as a
DSPy program: the same review as ToR's (`review_base.py`), on a single path that sees every
paragraph retrieved so far.

Example:
    >>> cor = ChainOfReviews(retriever=get_retriever("hotpotqa"))
    >>> pred = cor(question="Which city is the birthplace of the director of Jaws?")
    >>> pred.answer, pred.evidence, pred.tree["stats"]
"""

from __future__ import annotations

import dspy

from treeqa.data.corpus import Passage
from treeqa.programs.common import check_question
from treeqa.programs.review_base import ReviewProgram
from treeqa.programs.review_run import ReviewRun
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.encoder import EmbedFn
from treeqa.signatures.fusion import Evidence


class ChainOfReviews(ReviewProgram):
    """Chain of Reviews, ToR's chain baseline: one path; each turn retrieves `k` new paragraphs
    and reviews all paragraphs retrieved so far together.

    accept ends the chain with one piece of evidence; reject ends it without; search goes on
    with the new query until `max_turns`. The tree is one node per turn, with the `ids` and
    `titles` of every paragraph that turn's review saw. Defaults follow the paper: top-5 per query, 3 turns,
    and the review with reasoning (CoT expansion, Table 13).

    Args:
        retriever: searches the corpus; required.
        k: new paragraphs per turn.
        max_turns: the most retrieve-and-review turns.
        expansion, fusion, relevance_threshold, max_*_chars, embed_fn: as for `TreeOfReviews`.

    Example:
        >>> treeqa.configure("local")
        >>> program = treeqa.build_program("cor", treeqa.get_retriever(dataset="hotpotqa"))
        >>> program(question="Who was born first, Lecrae or Gawvi?").answer
    """

    name = "cor"
    tree_shape = "chain"
    annotation_demos = {"review": "review", "complete_paragraph": "complete", "fuse": "read"}  # MPC: expansion=mpc

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"expansion": ("cot", "mpc"), "max_turns": (2, 3), "k": (3, 5)}

    @classmethod
    def call_bound(cls, settings) -> int:
        """One review per turn, one MPC completion per turn that searches on, one fusion call."""
        return settings["max_turns"] * (2 if settings["expansion"] == "mpc" else 1) + 1

    def __init__(self, retriever: Retriever | None = None, k: int = 5, max_turns: int = 3,
                 expansion: str = "cot", fusion: str = "evidence", relevance_threshold: float | None = None,
                 max_context_chars: int = 6000, max_paragraph_chars: int = 800, max_review_chars: int = 6000,
                 max_query_chars: int = 600, embed_fn: EmbedFn | None = None):
        super().__init__(retriever, expansion, fusion, max_context_chars, max_paragraph_chars,
                         max_review_chars, max_query_chars, embed_fn, relevance_threshold)
        if expansion == "bridge":
            raise ValueError("expansion='bridge' is Tree of Reviews' (a chain has one path, so no second "
                             "hop to name); choose one of cot, mpc, direct, concat, linked")
        if k < 1 or max_turns < 1:
            raise ValueError(f"k and max_turns must be positive, got k={k}, max_turns={max_turns}")
        self.k = k
        self.max_turns = max_turns

    @property
    def expansion_width(self) -> int:
        """The new paragraphs each turn's search adds (`k`)."""
        return self.k

    def forward(self, question: str) -> dspy.Prediction:
        run = ReviewRun(check_question(question, type(self).__name__))
        path: list[Passage] = []
        query = run.question
        for turn in range(1, self.max_turns + 1):
            new = self.search_below(run, query, path, self.k, where=f"retrieve@turn{turn}")
            run.retrieved.extend(new)
            path += new
            node = run.add_node(depth=turn, parent=turn - 2 if turn > 1 else None, retrieved_by=query,
                                ids=[p.id for p in path], titles=[p.title for p in path])
            if not path:
                node.action = "reject"
                run.done_with(node)
                break
            mark = len(run.failures)
            outcome = self._review(run, path, where=f"review@turn{turn}", can_search=turn < self.max_turns)
            if outcome is None:
                node.action, node.failures = "reject", run.failures[mark:]
                run.done_with(node, new)
                break
            node.judged(outcome)
            for pid in outcome.seen_ids if outcome.relevant else ():  # only what the review was shown
                run.relevant_ids.setdefault(pid)
            if outcome.action == "accept":
                run.add_evidence(path, outcome.analysis, node.node)
            elif outcome.action == "search" and turn < self.max_turns:
                query = self._next_query(run, path, outcome, where=f"expand@turn{turn}")
                node.query, node.expanded = query, True
            node.failures = run.failures[mark:]
            run.done_with(node, new)
            if not node.expanded:
                break
        answer, source = self._answer(run, [Evidence((p,)) for p in path])
        return self._prediction(run, answer, source)
