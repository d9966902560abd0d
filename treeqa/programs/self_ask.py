"""Self-Ask (Press et al. 2022), a step-by-step baseline: the model asks itself simpler follow-up
questions one at a time, each answered from the passages it retrieves, and composes the final
answer from those answers.

Example:
    >>> pred = SelfAsk(get_retriever("hotpotqa"))(question="Where was the director of Jaws born?")
    >>> pred.follow_ups, pred.answer, pred.tree["stats"]["stop"]
"""

from __future__ import annotations

import dspy

from treeqa.data.passage import Passage
from treeqa.programs.common import Retrieving, check_ints, check_question, repeat_of, safe_call
from treeqa.programs.steps import StepTrace
from treeqa.retrievers.base import Retriever
from treeqa.signatures import budget
from treeqa.signatures.answer import Answer, AnswerFromPassages, clean_answer
from treeqa.signatures.formatting import format_history, format_passages
from treeqa.signatures.self_ask import FollowUp, clean_follow_up


class SelfAsk(Retrieving):
    """Up to `max_follow_ups` times, the model decides whether a follow-up question is needed and
    writes one (`follow_up`); the follow-up retrieves the top `k` passages and a short intermediate
    answer is read from them (`intermediate`). Then the final answer is written from the question
    and the follow-up/answer pairs (`answer`).

    Stops (the tree's `stop`): "enough" (the model needs no more follow-ups), "max_follow_ups"
    (the bound: no further follow-up is asked for), "repeated" (a follow-up repeats an earlier one,
    so its search would find the same passages), "no_follow_up" (a follow-up was wanted but none
    written) or "failed" (the follow-up call failed). A failed intermediate answer leaves that
    follow-up without an answer ("(no evidence)" in the history) and the chain goes on. The answer
    is the final call's; where it fails or says nothing, the last intermediate answer, which for a
    bridge question usually is the answer (the tree's `answer_from` says which).

    Departures from the paper: the intermediate answers come from dense retrieval over our corpus
    and a reading call, not from a search engine's answer box; a zero-shot (or compiled) 1.5B
    instruction model rather than GPT-3 with the paper's hand-written demos, so the decision
    ("Are follow up questions needed here") is a typed yes/no output and the final answer a call
    of its own rather than one continued scratchpad; at most 4 follow-ups, to bound one question's
    calls on two cores; the repeated-follow-up stop and the fallback answer are ours (a small model
    otherwise loops on one follow-up to the bound).

    Args:
        retriever: searches the corpus (required).
        k: passages retrieved for each follow-up.
        max_follow_ups: the most follow-up questions (each takes two LM calls).
        passage_chars: each passage is cut to this many characters when shown.

    Example:
        >>> treeqa.configure("local")
        >>> program = treeqa.build_program("selfask", treeqa.get_retriever(dataset="hotpotqa"))
        >>> program(question="Who was born first, Lecrae or Gawvi?").answer
    """

    name = "selfask"
    reader = "answer"
    tree_shape = "steps"
    annotation_demos = {"intermediate": "read"}

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"k": (3, 5), "max_follow_ups": (2, 3, 4)}

    @classmethod
    def call_bound(cls, settings) -> int:
        """A decision and an intermediate answer for each follow-up, then the final answer."""
        return 2 * settings["max_follow_ups"] + 1

    def __init__(self, retriever: Retriever | None = None, *, k: int = 5, max_follow_ups: int = 4,
                 passage_chars: int = 1000):
        super().__init__(retriever)
        check_ints(k=k, max_follow_ups=max_follow_ups, passage_chars=passage_chars)
        self.k, self.max_follow_ups, self.passage_chars = k, max_follow_ups, passage_chars
        self.follow_up = budget.predict(FollowUp)
        self.intermediate = budget.predict(AnswerFromPassages)
        self.answer = budget.predict(Answer)

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        trace = StepTrace(question)
        pairs: list[tuple[str, str]] = []  # (follow-up, intermediate answer; "" when its call failed)
        stop = "max_follow_ups"
        for step in range(1, self.max_follow_ups + 1):
            mark = len(failures)
            pred = safe_call(self.follow_up, failures, f"follow_up@step{step}", question=question,
                             history=format_history(pairs))
            if pred is None:
                stop = "failed"
                trace.step("reject", note="the follow-up call failed", failures=failures[mark:])
                break
            if pred.follow_up_needed is not True:
                stop = "enough"
                break
            follow_up = clean_follow_up(pred.follow_up)
            if not follow_up:
                stop = "no_follow_up"
                trace.step("reject", note="a follow-up was wanted but none was written")
                break
            earlier = repeat_of(follow_up, [asked for asked, _ in pairs])
            if earlier is not None:
                stop = "repeated"
                trace.step("reject", note=f"{follow_up} [repeats follow-up {earlier}: stopped]")
                break
            hits: list[Passage] = list(self.retriever.search(follow_up, self.k))
            pred = safe_call(self.intermediate, failures, f"intermediate@step{step}", question=follow_up,
                             passages=format_passages(hits, self.passage_chars))
            if pred is None:
                pairs.append((follow_up, ""))
                trace.step("reject", query=follow_up, passages=hits, note="the intermediate answer call failed",
                           failures=failures[mark:])
                continue
            said = clean_answer(pred.answer)
            pairs.append((follow_up, said))
            trace.step("search", query=follow_up, passages=hits,
                       note=f"intermediate answer: {said}" if said else "no intermediate answer")

        mark = len(failures)
        pred = safe_call(self.answer, failures, "answer", question=question, history=format_history(pairs))
        answer = clean_answer(pred.answer) if pred is not None else ""
        last = next((said for _, said in reversed(pairs) if said), "")
        answer_from = "final" if answer else ("last_follow_up" if last else "none")
        answer = answer or last
        trace.step("accept" if pred is not None else "reject", note=f"answer: {answer}" if answer else "no answer",
                   failures=failures[mark:])
        tree = trace.tree(stop=stop, retrievals=len(pairs), answer_from=answer_from)
        return dspy.Prediction(answer=answer, failures=failures, retrieved=trace.distinct_retrieved(),
                               follow_ups=[{"follow_up": q, "answer": a} for q, a in pairs], tree=tree,
                               stats=tree["stats"])
