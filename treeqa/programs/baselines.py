"""The baselines the papers compare against, with BeamSearchQA's interface.

Each takes its hyperparameters and a retriever (None when it does not retrieve), and
`forward(question)` returns `answer` ("" when its LM calls failed), `failures` and, when it
retrieves, `retrieved`.
"""

from __future__ import annotations

import dspy

from treeqa.programs.common import Retrieving, check_ints, check_question, safe_call
from treeqa.programs.contract import QAProgram
from treeqa.retrievers.base import Retriever
from treeqa.signatures import budget
from treeqa.signatures.answer import Answer, AnswerFromPassages, ReasonFromPassages, clean_answer
from treeqa.signatures.evidence import GenerateBackground
from treeqa.signatures.formatting import format_history, format_passages


def _answer_of(pred: dspy.Prediction | None) -> str:
    return clean_answer(pred.answer) if pred is not None else ""


class ClosedBookAnswer(QAProgram):
    """The model answers from its own knowledge, in one call: what the closed-book baselines
    share. A subclass names its predictor (`_predictor`) and what its prediction adds (`_more`);
    the predictor stays `self.answer`, so compiled files keep their predictor names."""

    annotation_demos = {"answer": "read-history"}

    @classmethod
    def call_bound(cls, settings) -> int:
        return 1

    @staticmethod
    def _predictor() -> dspy.Module:
        raise NotImplementedError

    @staticmethod
    def _more(pred: dspy.Prediction | None) -> dict:
        """What the prediction holds besides the answer and the failures."""
        return {}

    def __init__(self, retriever: Retriever | None = None):
        super().__init__()
        self.answer = self._predictor()

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        pred = safe_call(self.answer, failures, "answer", question=question, history=format_history([]))
        return dspy.Prediction(answer=_answer_of(pred), **self._more(pred), failures=failures)


class DirectAnswer(ClosedBookAnswer):
    """The model answers from its own knowledge, in one call (ALLIES' first seed alone).

    Example:
        >>> DirectAnswer()(question="who wrote the opera carmen").answer
    """

    name = "direct"

    reader = "answer"

    @staticmethod
    def _predictor() -> dspy.Module:
        return budget.predict(Answer)


class ChainOfThoughtAnswer(ClosedBookAnswer):
    """The model reasons step by step, then answers from its own knowledge (one call).

    Example:
        >>> pred = ChainOfThoughtAnswer()(question="who wrote the opera carmen")
        >>> pred.reasoning, pred.answer
    """

    name = "cot"

    @staticmethod
    def _predictor() -> dspy.Module:
        return budget.chain_of_thought(Answer)

    @staticmethod
    def _more(pred: dspy.Prediction | None) -> dict:
        return {"reasoning": pred.reasoning if pred is not None else ""}


class RetrieveThenAnswer(Retrieving):
    """Retrieve the top-k passages for the question and answer from them (one LM call).

    Args:
        retriever: searches the corpus (required).
        k: passages retrieved and shown to the model.
        passage_chars: each passage is cut to this many characters.
        reason: the reader writes a short reasoning before its answer (`ReasonFromPassages`), the
            form a reader trained on its own reasons (`treeqa train reasons`) answers in. A
            reasoning that finds no answer (it ran past its token budget, or its reply did not
            parse) is recorded as a failed call, and the bare reader (`bare`, one more call)
            answers in its place.

    Example:
        >>> RetrieveThenAnswer(get_retriever("hotpotqa"), k=5)(question="...").retrieved
    """

    name = "rta"
    annotation_demos = {"answer": "read"}
    trained_reading = {}  # its reader is the one trained

    reader = "answer"

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"k": (3, 5, 10)}

    @classmethod
    def call_bound(cls, settings) -> int:
        return 2 if settings.get("reason") else 1

    def __init__(self, retriever: Retriever | None = None, *, k: int = 5, passage_chars: int = 1000,
                 reason: bool = False):
        super().__init__(retriever)
        check_ints(k=k)
        if not isinstance(reason, bool):
            raise ValueError(f"RetrieveThenAnswer: reason is true or false, got {reason!r}")
        self.k, self.passage_chars, self.reason = k, passage_chars, reason
        self.answer = budget.predict(ReasonFromPassages if reason else AnswerFromPassages)
        if reason:
            self.bare = budget.predict(AnswerFromPassages)

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        passages = self.retriever.search(question, self.k)
        shown = format_passages(passages, self.passage_chars)
        pred = safe_call(self.answer, failures, "answer", question=question, passages=shown)
        if pred is None and self.reason:
            pred = safe_call(self.bare, failures, "bare", question=question, passages=shown)
        return dspy.Prediction(answer=_answer_of(pred), failures=failures, retrieved=list(passages))

    def load_state(self, state, **kwargs):
        """A reasoning rta's file saved before it had the bare reader holds no state for it: that
        reader stays as built (zero-shot), the rest loads as saved."""
        if self.reason and isinstance(state, dict) and "bare" not in state:
            state = {**state, "bare": self.bare.dump_state()}
        return super().load_state(state, **kwargs)


class GenRead(QAProgram):
    """GENREAD (generate-then-read): the model writes a background document for the question,
    then answers from it (two LM calls, no retrieval).

    Example:
        >>> pred = GenRead()(question="who wrote the opera carmen")
        >>> pred.document, pred.answer
    """

    name = "genread"
    annotation_demos = {"background": "background", "answer": "read"}

    reader = "answer"

    @classmethod
    def call_bound(cls, settings) -> int:
        return 2

    def __init__(self, retriever: Retriever | None = None):
        super().__init__()
        self.background = budget.predict(GenerateBackground)
        self.answer = budget.predict(AnswerFromPassages)

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        doc = safe_call(self.background, failures, "background", question=question)
        document = doc.document.strip() if doc is not None else ""
        pred = safe_call(self.answer, failures, "answer", question=question, passages=[document] if document else [])
        return dspy.Prediction(answer=_answer_of(pred), document=document, failures=failures)
