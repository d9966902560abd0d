"""Hop, DSPy's multi-hop tutorial pattern as a QA baseline: each hop writes a query from the
notes so far and takes notes from what it finds; the answer is read from the notes. Two LM calls
a hop and no search tree: the simplest program that searches more than once.

Example:
    >>> pred = Hop(get_retriever("hotpotqa"), hops=2)(question="Where was the director of Jaws born?")
    >>> pred.notes, pred.answer
"""

from __future__ import annotations

import dspy

from treeqa.data.passage import Passage
from treeqa.programs.common import Retrieving, check_ints, check_question, repeat_of, safe_call
from treeqa.programs.steps import StepTrace
from treeqa.retrievers.base import Retriever
from treeqa.signatures import budget
from treeqa.signatures.answer import AnswerFromPassages, clean_answer
from treeqa.signatures.formatting import format_passages
from treeqa.signatures.hop import NextSearchQuery, TakeNotes, clean_query


class Hop(Retrieving):
    """For `hops` rounds: write a search query from the question and the notes so far, retrieve the
    top `k` passages, and append notes (short facts relevant to the question) taken from them;
    then answer from the question and the notes.

    The reader is the one that reads passages (`AnswerFromPassages`), shown the notes as its
    passages: notes are sentences taken from passages, so the "read" demos the training
    annotations give (gold paragraphs -> the answer) teach it the task and the answer's form.
    When no note was taken (every notes call failed or found nothing) it reads the passages found
    instead, the first `k` of them, rather than answering blind.

    A failed or blank query falls back to the question itself when the question has not been
    searched yet, and otherwise ends the search ("no_query"); a query that repeats an earlier one
    ends it too ("repeated", its search would find the same passages). A failed notes call loses
    that hop's notes, not the search. Otherwise the search stops after `hops` ("hops").

    Departures from DSPy's tutorial (a claim-retrieval program on HoVer: 4 hops of 10 passages,
    chain-of-thought query and notes calls, no answer step): a QA reader added; 2 hops of 5 passages
    and plain predictors (no reasoning) to fit a 1.5B model's 4k window and two cores; notes
    capped (`max_notes`, `note_chars`); the query fallback and the repeated-query stop are ours.

    Args:
        retriever: searches the corpus (required).
        hops: rounds of query, search and notes.
        k: passages retrieved a hop.
        max_notes: the most notes kept; later ones are dropped.
        note_chars: each note is cut to this many characters.
        passage_chars: each passage is cut to this many characters when shown.

    Example:
        >>> treeqa.configure("local")
        >>> program = treeqa.build_program("hop", treeqa.get_retriever(dataset="hotpotqa"))
        >>> program(question="Who was born first, Lecrae or Gawvi?").answer
    """

    name = "hop"
    reader = "answer"
    tree_shape = "steps"
    annotation_demos = {"answer": "read"}

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"hops": (1, 2, 3), "k": (3, 5)}

    @classmethod
    def call_bound(cls, settings) -> int:
        """A query and a notes call a hop, then the reader."""
        return 2 * settings["hops"] + 1

    def __init__(self, retriever: Retriever | None = None, *, hops: int = 2, k: int = 5, max_notes: int = 8,
                 note_chars: int = 300, passage_chars: int = 1000):
        super().__init__(retriever)
        check_ints(hops=hops, k=k, max_notes=max_notes, note_chars=note_chars, passage_chars=passage_chars)
        self.hops, self.k, self.max_notes = hops, k, max_notes
        self.note_chars, self.passage_chars = note_chars, passage_chars
        self.generate_query = budget.predict(NextSearchQuery)
        self.append_notes = budget.predict(TakeNotes)
        self.answer = budget.predict(AnswerFromPassages)

    def _add_notes(self, notes: list[str], written: object, stats: dict) -> list[str]:
        """Append the new, non-blank notes of a reply (cut to `note_chars`, at most `max_notes` in
        all); the ones added."""
        items = written if isinstance(written, list) else [written]
        have, added = {n.lower() for n in notes}, []
        for item in items:
            note = " ".join(str(item or "").split())[:self.note_chars].strip()
            if not note or note.lower() in have:
                continue
            if len(notes) >= self.max_notes:
                stats["dropped_notes"] += 1
                continue
            have.add(note.lower())
            notes.append(note)
            added.append(note)
        return added

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        failures: list[dict] = []
        trace = StepTrace(question)
        notes: list[str] = []
        queries: list[str] = []
        stats = {"retrievals": 0, "dropped_notes": 0}
        stop = "hops"
        for hop in range(1, self.hops + 1):
            mark = len(failures)
            pred = safe_call(self.generate_query, failures, f"query@hop{hop}", question=question, notes=notes)
            query, fallback = clean_query(pred.query) if pred is not None else "", ""
            if not query and repeat_of(question, queries) is None:
                query, fallback = question, " [no query written: searched the question]"
            if not query:
                stop = "no_query"
                trace.step("reject", note="no query written, and the question was searched already",
                           failures=failures[mark:])
                break
            if repeat_of(query, queries) is not None:
                stop = "repeated"
                trace.step("reject", query=query, note="repeats an earlier query: stopped", failures=failures[mark:])
                break
            queries.append(query)
            stats["retrievals"] += 1
            hits: list[Passage] = list(self.retriever.search(query, self.k))
            pred = safe_call(self.append_notes, failures, f"notes@hop{hop}", question=question, notes=notes,
                             passages=format_passages(hits, self.passage_chars))
            if pred is None:
                trace.step("reject", query=query, passages=hits, note="the notes call failed" + fallback,
                           failures=failures[mark:])
                continue
            added = self._add_notes(notes, pred.new_notes, stats)
            trace.step("search", query=query, passages=hits, note=("\n".join(added) or "(no new notes)") + fallback,
                       failures=failures[mark:])

        if notes:
            read, shown = "notes", list(notes)
        else:
            found = trace.distinct_retrieved()[:self.k]
            read, shown = ("passages" if found else "nothing"), format_passages(found, self.passage_chars)
        mark = len(failures)
        pred = safe_call(self.answer, failures, "answer", question=question, passages=shown)
        answer = clean_answer(pred.answer) if pred is not None else ""
        trace.step("accept" if pred is not None else "reject", note=f"answer: {answer}" if answer else "no answer",
                   failures=failures[mark:])
        tree = trace.tree(stop=stop, **stats, notes=len(notes), read=read)
        return dspy.Prediction(answer=answer, failures=failures, retrieved=trace.distinct_retrieved(),
                               notes=notes, queries=queries, tree=tree, stats=tree["stats"])
