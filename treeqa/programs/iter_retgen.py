"""ITER-RETGEN (Shao et al. 2023), a step-by-step baseline: retrieval and generation take turns
for a fixed number of rounds, each round searching with the question and what the round before
generated, so the next search can find what the last answer's reasoning pointed to.

Example:
    >>> pred = IterRetGen(get_retriever("hotpotqa"), rounds=3)(question="Where was the director of Jaws born?")
    >>> pred.generations, pred.answer
"""

from __future__ import annotations

import dspy

from treeqa.data.passage import Passage
from treeqa.programs.common import Retrieving, check_ints, check_question, safe_call
from treeqa.programs.steps import StepTrace
from treeqa.retrievers.base import Retriever
from treeqa.signatures import budget
from treeqa.signatures.answer import AnswerFromPassages, clean_answer
from treeqa.signatures.formatting import format_passages
from treeqa.signatures.iter_retgen import ReasonThenAnswer, generation_text, round_query


class IterRetGen(Retrieving):
    """For `rounds` rounds: retrieve the top `k` passages (round 1 with the question, each later
    round with the question followed by the previous round's generation), then reason briefly and
    answer from that round's passages alone (`generate`). The last round's answer is the answer.

    A round whose generation fails (most often a reasoning that runs on past its token budget, cut
    off before the answer: 21 of the reference 100 questions lost a round that way) is recorded
    and answered again without reasoning (`answer_only`, a one-entity reply from the same
    passages), so the round still has an answer and the next round still searches with it.

    Stops (the tree's `stop`): "rounds" (every round ran), "converged" (a round generated exactly
    what the round before did, or nothing, so the next round would search with the same query, find
    the same passages and, with greedy decoding, generate the same again: it is not run) or "failed" (a
    round's generation and its answer-only retry both failed; the next round would repeat its
    query, so the search ends there). Where the last round run failed or wrote no answer, the
    answer is the latest round's that gave one (the tree's `answer_from` says which round).

    Departures from the paper: dense retrieval over our corpus rather than Contriever over
    Wikipedia; a zero-shot (or compiled) 1.5B instruction model rather than text-davinci-003 with
    chain-of-thought demos, so the reasoning is a typed output of a few sentences next to the
    answer; the question comes before the generation in the query (the encoder cuts long input
    from the end); the early stops and the fallback answer are ours (the paper always runs every
    round, which changes nothing where "converged" stops).

    Args:
        retriever: searches the corpus (required).
        rounds: retrieval-generation rounds (one LM call each).
        k: passages retrieved a round.
        passage_chars: each passage is cut to this many characters when shown.

    Example:
        >>> treeqa.configure("local")
        >>> program = treeqa.build_program("iterretgen", treeqa.get_retriever(dataset="hotpotqa"))
        >>> program(question="Who was born first, Lecrae or Gawvi?").answer
    """

    name = "iterretgen"
    reader = "generate"
    tree_shape = "steps"
    annotation_demos = {"generate": "read"}

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"rounds": (2, 3, 4), "k": (3, 5)}

    @classmethod
    def call_bound(cls, settings) -> int:
        """One generation a round, and an answer-only retry where it fails."""
        return 2 * settings["rounds"]

    def __init__(self, retriever: Retriever | None = None, *, rounds: int = 3, k: int = 5, passage_chars: int = 1000):
        super().__init__(retriever)
        check_ints(rounds=rounds, k=k, passage_chars=passage_chars)
        self.rounds, self.k, self.passage_chars = rounds, k, passage_chars
        self.generate = budget.predict(ReasonThenAnswer)
        self.answer_only = budget.predict(AnswerFromPassages)

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        trace = StepTrace(question)
        generations: list[dict] = []  # one a round that answered: {"round", "query", "reasoning", "answer"}
        answer, answer_from = "", None
        query, generation, stop = question, "", "rounds"
        for turn in range(1, self.rounds + 1):
            hits: list[Passage] = list(self.retriever.search(query, self.k))
            mark = len(failures)
            shown = format_passages(hits, self.passage_chars)
            pred = safe_call(self.generate, failures, f"generate@round{turn}", question=question, passages=shown)
            if pred is None:
                pred = safe_call(self.answer_only, failures, f"answer_only@round{turn}", question=question,
                                 passages=shown)
            if pred is None:
                stop = "failed"
                trace.step("reject", query=query, passages=hits, note="the generation call failed",
                           failures=failures[mark:])
                break
            reasoning = " ".join(str(getattr(pred, "reasoning", "") or "").split())
            said = clean_answer(pred.answer)
            generations.append({"round": turn, "query": query, "reasoning": reasoning, "answer": said})
            if said:
                answer, answer_from = said, turn
            # a blank generation adds nothing: the next round would search with this round's query again
            generation = generation_text(reasoning, said) or generation
            following = round_query(question, generation)
            if turn < self.rounds and following == query:
                stop = "converged"
            last = turn == self.rounds or stop == "converged"
            retried = "[the generation failed: answered again without reasoning]" if len(failures) > mark else ""
            note = "\n".join(filter(None, [retried, reasoning, f"answer: {said}" if said else "no answer",
                                           "[the next round would search with this query again: stopped]"
                                           if stop == "converged" else ""]))
            trace.step("accept" if last else "search", query=query, passages=hits, note=note,
                       failures=failures[mark:])
            if last:
                break
            query = following
        tree = trace.tree(stop=stop, retrievals=len(trace.nodes), rounds_run=len(generations),
                          answer_from=answer_from)
        return dspy.Prediction(answer=answer, failures=failures, retrieved=trace.distinct_retrieved(),
                               generations=generations, tree=tree, stats=tree["stats"])
