"""IRCoT (Trivedi et al. 2023), a step-by-step baseline: each sentence of a chain of thought
is also the next search query, so retrieval follows the reasoning hop by hop.

Example:
    >>> pred = IRCoT(get_retriever("hotpotqa"))(question="Where was the director of Jaws born?")
    >>> pred.reasoning, pred.answer, pred.tree["stats"]["stop"]
"""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from treeqa.data.passage import Passage
from treeqa.programs.common import Retrieving, check_ints, check_question, repeat_of, safe_call
from treeqa.programs.steps import StepTrace
from treeqa.retrievers.base import Retriever
from treeqa.signatures import budget
from treeqa.signatures.answer import AnswerFromPassages, clean_answer
from treeqa.signatures.ircot import NO_REASONING_YET, NextReasoningStep, concluded_answer, first_sentence
from treeqa.signatures.review import review_paragraphs


class IRCoT(Retrieving):
    """Interleaved retrieval and chain of thought: retrieve the top `k` passages for the question;
    then, up to `max_steps` times, the model writes the next sentence of its reasoning from the
    passages collected so far and that sentence retrieves `k` more (new ones join the collection,
    at most `max_passages`); a sentence that states the answer ("so the answer is ...") ends it.
    A separate reader then answers from the collection, as in the paper's "IRCoT QA".

    Stops (the tree's `stop`): "answered" (a sentence stated the answer), "max_steps" (the bound:
    the last sentence is recorded, not searched), "repeated" (a sentence repeats an earlier one,
    so its search would find nothing new), "empty" (a blank reply) or "failed" (a failed call).
    The answer is the reader's; where the reader fails or says nothing, the answer the reasoning
    stated, if any.

    Departures from the paper: dense retrieval over our corpus rather than BM25; a zero-shot
    (or compiled) 1.5B instruction model rather than Flan-T5 / GPT-3 with hand-written CoT demos,
    so the step is a typed signature asked for one sentence (only the first sentence of a reply
    is kept, as in the paper); at most 4 steps rather than 8, to bound one question's calls on
    two cores; the collection is shown cut to `max_context_chars` so it fits a 4k window; and the
    repeated-sentence stop is ours (a small model otherwise loops on one sentence to the bound).

    Args:
        retriever: searches the corpus (required).
        k: passages retrieved for the question and for each sentence.
        max_steps: the most reasoning sentences (LM calls before the reader).
        max_passages: the most passages collected (the paper caps them at 15); later ones are dropped.
        passage_chars: each passage is cut to this many characters when shown.
        max_context_chars: the most characters of passages one call is shown (passages are cut
            evenly to fit).

    Example:
        >>> treeqa.configure("local")
        >>> program = treeqa.build_program("ircot", treeqa.get_retriever(dataset="hotpotqa"))
        >>> program(question="Who was born first, Lecrae or Gawvi?").answer
    """

    name = "ircot"
    reader = "answer"
    tree_shape = "steps"
    annotation_demos = {"answer": "read"}

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"k": (3, 5), "max_steps": (2, 4, 6)}

    @classmethod
    def call_bound(cls, settings) -> int:
        """One reasoning call a step, then the reader."""
        return settings["max_steps"] + 1

    def __init__(self, retriever: Retriever | None = None, *, k: int = 5, max_steps: int = 4,
                 max_passages: int = 15, passage_chars: int = 1000, max_context_chars: int = 6000):
        super().__init__(retriever)
        check_ints(k=k, max_steps=max_steps, max_passages=max_passages, passage_chars=passage_chars,
                   max_context_chars=max_context_chars)
        if max_passages < k:
            raise ValueError(f"max_passages ({max_passages}) must be at least k ({k}): the question's own "
                             f"passages would not fit the collection")
        self.k, self.max_steps, self.max_passages = k, max_steps, max_passages
        self.passage_chars, self.max_context_chars = passage_chars, max_context_chars
        self.reason = budget.predict(NextReasoningStep)
        self.answer = budget.predict(AnswerFromPassages)

    def _shown(self, passages: Sequence[Passage]) -> list[str]:
        return review_paragraphs(passages, self.passage_chars, self.max_context_chars) if passages else []

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        trace = StepTrace(question)
        collected: list[Passage] = []
        stats = {"retrievals": 0, "dropped": 0}  # dropped: new passages found past max_passages
        trace.step("search", query=question, passages=self._collect(question, collected, stats))
        sentences, stop, stated = self._reason(question, collected, stats, trace, failures)

        mark = len(failures)
        pred = safe_call(self.answer, failures, "answer", question=question, passages=self._shown(collected))
        answer = clean_answer(pred.answer) if pred is not None else ""
        answer_from = "reader" if answer else ("reasoning" if stated else "none")
        answer = answer or stated or ""
        conclusion = sentences[-1] if stop == "answered" else ""
        trace.step("accept" if pred is not None else "reject", note="\n".join(filter(None, [conclusion,
                   f"answer: {answer}" if answer else "no answer"])), failures=failures[mark:])
        tree = trace.tree(stop=stop, **stats, reasoning_steps=len(sentences), passages=len(collected),
                          answer_from=answer_from)
        return dspy.Prediction(answer=answer, failures=failures, retrieved=trace.distinct_retrieved(),
                               reasoning=sentences, tree=tree, stats=tree["stats"])

    def _collect(self, query: str, collected: list[Passage], stats: dict[str, int]) -> list[Passage]:
        """Retrieve for `query`; the passages that joined the collection. Passages already
        collected are skipped; new ones past `max_passages` are counted in `stats["dropped"]`."""
        stats["retrievals"] += 1
        seen, new = {p.id for p in collected}, []
        for p in self.retriever.search(query, self.k):
            if p.id in seen:
                continue
            seen.add(p.id)
            if len(collected) < self.max_passages:
                collected.append(p)
                new.append(p)
            else:
                stats["dropped"] += 1
        return new

    def _reason(self, question: str, collected: list[Passage], stats: dict[str, int], trace: StepTrace,
                failures: list[dict]) -> tuple[list[str], str, str | None]:
        """The interleaved loop, apart so `forward` reads as search, reason, read: up to
        `max_steps` sentences, each but a concluding or the last one searched, until one states
        the answer, repeats, is blank or fails. Returns the sentences, why it stopped (the tree's
        `stop`) and the answer a sentence stated (None if none did)."""
        sentences: list[str] = []
        stop, stated = "max_steps", None
        for step in range(1, self.max_steps + 1):
            mark = len(failures)
            pred = safe_call(self.reason, failures, f"reason@step{step}", question=question,
                             passages=self._shown(collected), reasoning_so_far=" ".join(sentences) or NO_REASONING_YET)
            if pred is None:
                stop = "failed"
                trace.step("reject", note="the reasoning call failed", failures=failures[mark:])
                break
            sentence = first_sentence(pred.next_sentence)
            if not sentence:
                stop = "empty"
                trace.step("reject", note="the model wrote no sentence")
                break
            earlier = repeat_of(sentence, sentences)
            if earlier is not None:
                stop = "repeated"
                trace.step("reject", note=f"{sentence} [repeats step {earlier}: stopped]")
                break
            sentences.append(sentence)
            stated = concluded_answer(sentence)
            if stated is not None:
                stop = "answered"  # the concluding sentence is the final node's, with the reader's answer
                break
            if step == self.max_steps:
                trace.step("reject", note=f"{sentence} [max_steps reached: not searched]")
                break
            trace.step("search", query=sentence, passages=self._collect(sentence, collected, stats), note=sentence)
        return sentences, stop, stated
