"""The question -> answer signature the ReAct agent is built on.

`dspy.ReAct` derives both of its predictors from it: the step predictor (its instructions plus
DSPy's own agent text and the tool list) and the extract predictor that reads the trajectory and
answers. So the instructions here have to make sense for searching and for answering alike.
"""

from __future__ import annotations

from typing import ClassVar

import dspy


class SearchThenAnswer(dspy.Signature):
    """Answer the question with the help of a search engine over a collection of documents.

    Look for one fact at a time. When the question links two things (the author of a book and
    the author's birthplace, say), first search for the link, then search again with the name
    you found. Write short, specific search queries, such as a name with the fact you need, not
    the whole question. Stop searching once the passages found settle the question.

    The answer is one short entity: a name, a place, a date or a number, or yes/no for a yes/no
    question, with no sentence around it. If the passages do not settle it, give your best guess."""

    max_tokens: ClassVar[int] = 48  # the answer: one short entity
    # one agent step: a thought of a sentence or two, the tool's name and its JSON arguments
    step_max_tokens: ClassVar[int] = 256

    question: str = dspy.InputField(desc="a question that may need facts from more than one document")
    answer: str = dspy.OutputField(desc="one short entity, a few words at most")
