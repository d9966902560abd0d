"""What Tree of Reviews and Chain of Reviews share, as their base class: the review of a path
(by the model, a relevance threshold or a compiled path judge), the query expansion, the fusion
reader and the recall ranking. Each program only walks its own search shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import dspy
import numpy as np

from treeqa.data.corpus import Passage
from treeqa.judging.path_judge import check_path_judge
from treeqa.judging.verdicts import LOGPROBS, verdict_probability
from treeqa.lm import is_embedded
from treeqa.programs.common import SharedRef, check_retriever, record_failure, safe_call
from treeqa.programs.judged import JudgedProgram
from treeqa.programs.review_run import ReviewRun, rank_retrieved
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.encoder import EmbedFn
from treeqa.retrievers.links import title_links
from treeqa.signatures import budget
from treeqa.signatures.answer import clean_answer
from treeqa.signatures.fusion import FUSION_INPUT, FUSION_SIGNATURES, FUSIONS, PASSAGES_READ, Evidence, fusion_context
from treeqa.signatures.review import (
    CompleteMissingParagraph,
    NameBridgeEntity,
    ParagraphReview,
    ReviewOutcome,
    ReviewWithReasoning,
    clean_text,
    enforce_review_rules,
    review_paragraphs,
    select_for_review,
)

EXPANSIONS: tuple[str, ...] = ("direct", "cot", "mpc", "concat", "linked", "bridge")
# the query is made from the path itself: a search decision costs no LM call
NO_LM_EXPANSIONS = ("concat", "linked")
# the query has a predictor of its own, so a path judge's "search" needs no review call
OWN_QUERY_EXPANSIONS = ("mpc", "bridge", *NO_LM_EXPANSIONS)
# the title links of the path's newest paragraph join its search's hits
LINKING_EXPANSIONS = ("linked", "bridge")
# the bridge entity is named from the path's paragraphs cut to this: a name is in a paragraph's
# opening sentences, and a short prompt keeps the call at about a second on 2 cores
BRIDGE_PARAGRAPH_CHARS = 600
BRIDGE_NAME_CHARS = 100  # a name, not a paragraph: a runaway reply is cut here


class ReviewProgram(JudgedProgram):
    """What ToR and CoR share: the review, the query expansion, the fusion reader, the ranking.

    Predictors (the only state `save`/`load` keep): `review`, `complete_paragraph` (MPC
    expansion only), `name_bridge` (bridge expansion only) and `fuse`. The retriever and the
    embedding function are plain attributes, shared (never copied) when an optimizer deep-copies the program.
    """

    retrieves = True
    fitted_settings = ("relevance_threshold",)
    reader = "fuse"
    query_writer = "complete_paragraph"  # under MPC expansion only (`no_query_writer`)

    @classmethod
    def no_query_writer(cls, settings) -> str | None:
        if settings["expansion"] in NO_LM_EXPANSIONS:
            return (f"makes its queries without the LM with expansion={settings['expansion']} (from the path's "
                    "newest paragraph); only expansion=mpc has a predictor that writes them")
        if settings["expansion"] == "bridge":
            return ("names the bridge entity with expansion=bridge (name_bridge, a name, not a search to "
                    "score); only expansion=mpc has a predictor that writes whole queries (complete_paragraph)")
        if settings["expansion"] != "mpc":
            return (f"writes its queries inside the review with expansion={settings['expansion']}; only "
                    "expansion=mpc has a predictor of its own that writes them (complete_paragraph)")
        return None

    def check_fitted(self, fitted: dict) -> None:
        threshold = fitted.get("relevance_threshold")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"relevance_threshold must be between 0 and 1 (or None), got {threshold}")
        if fitted.get("path_judge") is not None:
            if threshold is not None:
                raise ValueError("set relevance_threshold or path_judge, not both: each decides relevance")
            check_path_judge(fitted["path_judge"])

    def __init__(self, retriever: Retriever | None, expansion: str, fusion: str, max_context_chars: int,
                 max_paragraph_chars: int, max_review_chars: int, max_query_chars: int,
                 embed_fn: EmbedFn | None, relevance_threshold: float | None, bridge_calls: int = 2):
        super().__init__()
        if relevance_threshold is not None and not 0.0 <= relevance_threshold <= 1.0:
            raise ValueError(f"relevance_threshold must be between 0 and 1 (or None), got {relevance_threshold}")
        self.relevance_threshold = relevance_threshold
        self._keep_judge(None, embed_fn)  # ToR sets path_judge; CoR's paths are longer than the judge is fitted on
        check_retriever(retriever, type(self).__name__, needed=True)
        if expansion not in EXPANSIONS:
            raise ValueError(f"unknown expansion {expansion!r}; choose one of {', '.join(EXPANSIONS)}")
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
        for name, value in (("max_context_chars", max_context_chars), ("max_paragraph_chars", max_paragraph_chars),
                            ("max_review_chars", max_review_chars), ("max_query_chars", max_query_chars),
                            ("bridge_calls", bridge_calls)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self._retriever = SharedRef(retriever)  # shared, never copied, when optimizers deep-copy
        self.expansion = expansion
        self.fusion = fusion
        self.max_context_chars = max_context_chars
        self.max_paragraph_chars = max_paragraph_chars
        self.max_review_chars = max_review_chars
        self.max_query_chars = max_query_chars
        self.bridge_calls = bridge_calls
        self.review = budget.predict(ReviewWithReasoning if expansion == "cot" else ParagraphReview)
        if expansion == "mpc":
            self.complete_paragraph = budget.predict(CompleteMissingParagraph)
        if expansion == "bridge":
            self.name_bridge = budget.predict(NameBridgeEntity)
        self.fuse = budget.predict(FUSION_SIGNATURES[fusion])

    @property
    def retriever(self) -> Retriever:
        return self._retriever.value

    @property
    def expansion_width(self) -> int:
        """How many paragraphs a search from a path's query adds (the query writer's compile scores it so)."""
        raise NotImplementedError

    def search_below(self, run: ReviewRun, query: str, path: Sequence[Passage], width: int,
                     where: str) -> list[Passage]:
        """The `width` paragraphs a search with `query` adds below `path`: it retrieves past the
        path's own paragraphs, so a path never repeats one and still gets `width` new ones. With
        `expansion="linked"` the paragraphs the path's newest one names by title come first; below a
        query made from a bridge entity's name (`expansion="bridge"`) that query's hits come first,
        the last place kept for the newest paragraph's first title link."""
        on_path = {p.id for p in path}
        hits = self._retrieve(run, query, width + len(path), where)
        found = [p for p in hits if p.id not in on_path][:width]
        if self.expansion not in LINKING_EXPANSIONS or not path:
            return found
        linked = self._linked(run, query, path, on_path, width, where)
        first = linked
        if query in run.named_queries:  # the name's hits first, one place kept for a title link
            ahead = found[:max(width - 1, 1)]
            seen = {p.id for p in ahead}
            linked = [p for p in linked if p.id not in seen][:1] if width > 1 else []
            first = ahead + linked
        run.stats["linked"] += len(linked)
        taken = {p.id for p in first}
        return (first + [p for p in found if p.id not in taken])[:width]

    def _linked(self, run: ReviewRun, query: str, path: Sequence[Passage], on_path: set[str], width: int,
                where: str) -> list[Passage]:
        """The paragraphs the path's newest one names by title (`treeqa.retrievers.links`), the
        `width` closest to `query` by the encoder; none where the corpus or encoder fails."""
        try:
            named = title_links(self.retriever).named_in(path[-1].text, exclude=on_path)
            if len(named) > width:
                vectors = np.asarray(self.judge_embed_fn()([query] + [p.as_text() for p in named]))
                order = np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")
                named = [named[i] for i in order]
        except Exception as exc:  # noqa: BLE001 - without links the search's own hits stand
            record_failure(run.failures, f"{where}:links", exc)
            return []
        return named[:width]

    def _retrieve(self, run: ReviewRun, query: str, k: int, where: str) -> list[Passage]:
        run.stats["retrievals"] += 1
        try:
            hits = list(self.retriever.search(query, k))
        except Exception as exc:  # noqa: BLE001 - a failed search ends this branch, not the question
            record_failure(run.failures, where, exc)
            return []
        return hits

    def _wants_probabilities(self) -> bool:
        """Ask for the verdicts' probabilities where they decide (a threshold is set) or come
        almost free (the embedded engine: about 0.6 ms a generated token); an endpoint that may
        not support log-probabilities is not asked for them otherwise."""
        return self.relevance_threshold is not None or is_embedded(dspy.settings.lm)

    def _review_call(self, question: str, passages: Sequence[Passage], failures: list[dict],
                     where: str, can_search: bool, can_accept: bool = True) -> ReviewOutcome | None:
        """The review LM call alone (safe to run in a worker thread): None when it fails.

        With `relevance_threshold`, relevance is the model's probability of `true` against the
        threshold, not its written verdict; where the reply has no probabilities the written
        verdict stands and the outcome says so (`p_relevant` None, counted as a judge fallback).
        With a `path_judge`, the judge decides both verdicts and the model only writes what
        the action needs: a path the judge rejects, and one it sends on to an MPC search (the
        completion writes the query) or drops at the last level, cost no LM call; a path it
        accepts gets the review for its analysis, and is accepted whether or not one comes,
        unless the reader reads paragraphs only (`fusion` paragraph or passages): then no analysis is
        read and the accept costs no LM call either.
        """
        fallback_query = f"{question} {passages[-1].title}"
        judge, relevant, sufficient, judged = self._judge(), None, None, (None, None)
        if judge is not None:
            try:
                judged = judge.probabilities(question, passages, self.judge_embed_fn())
            except Exception as exc:  # noqa: BLE001 - without the encoder the review's own verdicts decide
                record_failure(failures, f"{where}:judge", exc)
            else:
                relevant = judged[0] >= judge.relevance.threshold
                sufficient = judged[1] >= judge.sufficiency.threshold
                decided = enforce_review_rules(None, fallback_query, can_search=can_search, can_accept=can_accept,
                                               relevant=relevant, sufficient=sufficient, require_analysis=False)
                if (decided.action == "reject"
                        or (decided.action == "search"
                            and (self.expansion in OWN_QUERY_EXPANSIONS or not can_search))
                        or (decided.action == "accept" and self.fusion in ("paragraph", "passages"))):
                    return replace(decided, corrected=False, seen_ids=tuple(p.id for p in passages),
                                   judge_relevant=judged[0], judge_sufficient=judged[1], judge_only=True)
        shown, paragraphs = select_for_review(passages, self.max_paragraph_chars, self.max_review_chars)
        extra = {"config": LOGPROBS} if self._wants_probabilities() else {}
        pred = safe_call(self.review, failures, where, question=question, paragraphs=paragraphs, **extra)
        if pred is None:
            return None
        p_relevant, p_sufficient = verdict_probability(pred, "relevant"), verdict_probability(pred, "sufficient")
        if self.relevance_threshold is not None and p_relevant is not None:
            relevant = p_relevant >= self.relevance_threshold
        outcome = enforce_review_rules(pred, fallback_query=fallback_query, can_search=can_search,
                                       can_accept=can_accept, relevant=relevant, sufficient=sufficient,
                                       require_analysis=judge is None or judged[0] is None)
        return replace(outcome, seen_ids=tuple(p.id for p in shown), p_relevant=p_relevant,
                       p_sufficient=p_sufficient, judge_relevant=judged[0], judge_sufficient=judged[1])

    def _review(self, run: ReviewRun, passages: Sequence[Passage], where: str, can_search: bool,
                ready: tuple[list[dict], ReviewOutcome | None] | None = None,
                can_accept: bool = True) -> ReviewOutcome | None:
        """One review of `passages` together (or its result from a concurrent batch); None,
        counted and recorded, when the call failed."""
        run.stats["reviews"] += 1
        if ready is None:
            outcome = self._review_call(run.question, passages, run.failures, where, can_search, can_accept)
        else:
            failures, outcome = ready
            run.failures.extend({**f, "where": where} for f in failures)
        if outcome is None:
            run.stats["review_failures"] += 1
            return None
        run.stats["corrected"] += outcome.corrected
        run.stats["judge_only"] += outcome.judge_only
        run.stats["judge_fallbacks"] += self.relevance_threshold is not None and outcome.p_relevant is None
        return outcome

    def _next_query(self, run: ReviewRun, passages: Sequence[Passage], outcome: ReviewOutcome, where: str) -> str:
        """The query that expands a path: the review's own (direct, CoT), the missing paragraph
        (MPC), or the question followed by the path's newest paragraph (concat and linked, no LM
        call: the dense encoder finds what that paragraph leads to, as multi-hop dense retrievers
        do; linked also follows the paragraph's title links, `search_below`). Bridge: the first
        `bridge_calls` expansions of a question name the entity the rest of the question is about
        (one short call), and search for that name followed by the question; the later ones, and
        one whose call fails or names nothing, search as linked does.

        If MPC fails or writes nothing, the review's query is used, so a search always has one.
        """
        if self.expansion == "bridge" and run.stats["bridges"] < self.bridge_calls:
            query = self._bridge_query(run, passages, where)
            if query:
                return query
        if self.expansion in LINKING_EXPANSIONS or self.expansion in NO_LM_EXPANSIONS:
            return concat_query(run.question, passages[-1], self.max_query_chars)
        if self.expansion == "mpc":
            run.stats["completions"] += 1
            pred = safe_call(self.complete_paragraph, run.failures, where,
                             **self.completion_inputs(run.question, passages))
            query = self.completion_query(pred)
            if query:
                return query
            run.stats["completion_failures"] += 1
        run.stats["query_fallbacks"] += outcome.query_fallback
        return outcome.next_query[:self.max_query_chars]

    def _bridge_query(self, run: ReviewRun, passages: Sequence[Passage], where: str) -> str:
        """The bridge entity's name followed by the question ("" where the call fails or names
        nothing); the query is remembered so that its search puts its own hits first."""
        run.stats["bridges"] += 1
        paragraphs = review_paragraphs(passages, min(self.max_paragraph_chars, BRIDGE_PARAGRAPH_CHARS),
                                       self.max_review_chars)
        pred = safe_call(self.name_bridge, run.failures, f"{where}:bridge", question=run.question,
                         paragraphs=paragraphs)
        name = clean_text(pred.entity if pred is not None else "").strip("\"'`.")[:BRIDGE_NAME_CHARS].strip()
        if not name:
            run.stats["bridge_failures"] += 1
            return ""
        query = f"{name} {run.question}"
        run.named_queries.add(query)
        return query

    def completion_inputs(self, question: str, passages: Sequence[Passage]) -> dict[str, object]:
        """What the MPC completion reads for a path: the question and the path's paragraphs,
        cut as a review's are."""
        return {"question": question,
                "paragraphs": review_paragraphs(passages, self.max_paragraph_chars, self.max_review_chars)}

    def completion_query(self, prediction: dspy.Prediction | None) -> str:
        """The query an MPC completion makes: its paragraph, cleaned and cut to `max_query_chars`;
        empty where it wrote none (the search then falls back to the review's query)."""
        text = clean_text(prediction.missing_paragraph) if prediction is not None else ""
        return text[:self.max_query_chars]

    def completion_queries(self, prediction: dspy.Prediction | None, question: str) -> list[str]:
        """The searches an MPC completion makes: its one paragraph, none where it wrote none."""
        query = self.completion_query(prediction)
        return [query] if query else []

    def _answer(self, run: ReviewRun, fallback: Sequence[Evidence], extra: Sequence[Evidence] = ()) -> tuple[str, str]:
        """Fuse the evidence pool and the `extra` paragraphs after it; with an empty pool, read
        the `fallback` paragraphs instead."""
        pool, source = self._pieces(run, fallback, extra)
        pred = safe_call(self.fuse, run.failures, "fuse", **self.fuse_inputs(run.question, pool))
        return (clean_answer(pred.answer) if pred is not None else ""), source

    @property
    def passages_read(self) -> int:
        """How many distinct paragraphs the passages reader (`fusion="passages"`) is shown."""
        return PASSAGES_READ

    def _pieces(self, run: ReviewRun, fallback: Sequence[Evidence], extra: Sequence[Evidence] = ()) -> tuple[list, str]:
        """The evidence pieces the reader reads, and where they came from."""
        if run.pool:
            return list(run.pool) + list(extra), "evidence+top" if extra else "evidence"
        return list(fallback), "fallback"

    def fuse_inputs(self, question: str, pool: Sequence[Evidence]) -> dict[str, Any]:
        """The fusion reader's inputs for `pool`, as its one call gets them (and a training read
        built from a recorded search: `treeqa.train.tor_reads`)."""
        context = (fusion_context(self.fusion, pool, self.max_context_chars, self.max_paragraph_chars,
                                  self.passages_read) if pool else [])
        return {"question": question, FUSION_INPUT[self.fusion]: context}

    def _prediction(self, run: ReviewRun, answer: str, source: str) -> dspy.Prediction:
        try:
            retrieved = rank_retrieved(run.pool, run.retrieved, answer, list(run.relevant_ids), self.embed_fn)
        except Exception as exc:  # noqa: BLE001 - without the encoder the tiers stay in discovery order
            record_failure(run.failures, "rerank", exc)
            retrieved = rank_retrieved(run.pool, run.retrieved, "", list(run.relevant_ids))
        stats = dict(run.stats, nodes=len(run.nodes), evidence=len(run.pool), failures=len(run.failures),
                     distinct_retrieved=len(retrieved), fused_from=source)
        return dspy.Prediction(answer=answer, evidence=run.evidence_records(),
                               tree={"question": run.question, "nodes": [n.to_dict() for n in run.nodes],
                                     "stats": stats},
                               retrieved=retrieved, retrieved_ids=[p.id for p in retrieved],
                               failures=run.failures, stats=stats)


def concat_query(question: str, paragraph: Passage, max_chars: int) -> str:
    """The question, then the paragraph's title and text, cut to `max_chars` (the question is
    never cut: it comes first)."""
    return f"{question} {paragraph.title}: {paragraph.text}"[:max(max_chars, len(question))]
