"""Scripts for the scripted LM: the Tree/Chain of Reviews' (a retriever, review replies, a whole
script, a runner) and the beam search's (`BeamScript`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import dspy

from tests.fakes.lm import Call, review_kind, scripted_lm
from tests.fakes.retrievers import FakeRetriever

# --- Tree/Chain of Reviews: a retriever, review replies, a whole script, a runner -------------

Q = "Who wrote the novel that the film Example was based on?"


def tree_retriever(fixed=None) -> FakeRetriever:
    """The fake retriever in counter mode: fresh paragraphs N1, N2, ... (see `FakeRetriever`)."""
    return FakeRetriever("counter", fixed)


def review(action: str, next_query: str = "", analysis: str = "", reasoning: str | None = None) -> dict:
    """A review reply whose judgments agree with `action`."""
    reply = {} if reasoning is None else {"reasoning": reasoning}
    reply.update(relevant=action != "reject", sufficient=action == "accept", action=action,
                 next_query=next_query, analysis=analysis)
    return reply


def answering(review_fn: Callable[[Call], dict | str], answer: str = "42",
              missing: Callable[[Call], str] | None = None,
              bridge: Callable[[Call], object] | None = None) -> Callable[[Call], dict | str]:
    """A full script: reviews by `review_fn`, MPC paragraphs by `missing`, bridge entities by
    `bridge` (a name, or an exception to raise), fusion answers `answer`."""

    def script(call: Call):
        if call.kind == "review":
            return review_fn(call)
        if call.kind == "complete":
            return {"missing_paragraph": missing(call) if missing else f"missing after {call.titles[-1]}"}
        if call.kind == "bridge":
            name = bridge(call) if bridge else f"entity of {call.titles[-1]}"
            return name if isinstance(name, BaseException) else {"entity": name}
        return {"answer": answer}

    return script


def run(program, script, question=Q):
    """Run a ToR/CoR program under a scripted LM; returns the prediction and the engine."""
    lm, engine = scripted_lm(script, classify=review_kind, whole_call=True, usage=(1, 1))
    with dspy.context(lm=lm):
        pred = program(question=question)
    return pred, engine


# --- the beam search's script --------------------------------------------------------------------

_LAST_QUERY = re.compile(r"Query: (.*)")
_PASSAGE_OF = re.compile(r"text \d+ about (.*)")


class BeamScript:
    """Replies of the scripted LM to BeamSearchQA (`scripted_lm(BeamScript(...))`), which name every
    state by the last sub-question on its path ("root" for the seed without evidence, the question
    itself for the seed with evidence, "root1", "root12" … below them): sub-questions
    "<name><i>" (or `asks[name]`), answers "ans:<name>" (or `answers[name]`), confidences from
    `conf` (else `default`); (kind, name) pairs in `fail` raise instead of replying, those in
    `garbage` score "no idea"."""

    def __init__(self, conf=None, default=0.1, asks=None, fail=(), garbage=(), answers=None):
        self.conf, self.default = conf or {}, default
        self.asks, self.fail, self.garbage = asks or {}, set(fail), set(garbage)
        self.answers = answers or {}

    @staticmethod
    def name_of(history: str) -> str:
        queries = _LAST_QUERY.findall(history)
        return queries[-1].strip() if queries else "root"

    def __call__(self, kind, inputs):
        if kind == "sub_questions":
            name = self.name_of(inputs["history"])
            asked = self.asks.get(name, [f"{name}{i}" for i in range(1, int(inputs["max_questions"]) + 1)])
            reply = {"sub_questions": json.dumps(asked)}
        elif kind == "evidence":
            name = _PASSAGE_OF.search(inputs["passages"][0]).group(1)
            reply = {"evidence": f"facts about {name}"}
        elif kind == "document":
            name = inputs["question"]
            reply = {"document": f"background on {name}"}
        elif kind == "answer":
            name = self.name_of(inputs["history"])
            reply = {"answer": self.answers.get(name, f"ans:{name}")}
        elif kind == "confidence":
            name = self.name_of(inputs["history"])
            value = "no idea" if (kind, name) in self.garbage else str(self.conf.get(name, self.default))
            reply = {"confidence": value}
        else:
            raise AssertionError(f"unexpected call for {kind}")
        if (kind, name) in self.fail:
            return RuntimeError(f"scripted failure of {kind} for {name}")
        return reply
