"""Tree/Chain of Reviews helpers over the one set of test doubles (`tests.fakes`): a script
shape for reviews, a retriever that invents numbered paragraphs, and a runner."""

from __future__ import annotations

from collections.abc import Callable

import dspy
import numpy as np
import pytest

from tests.fakes import Call, FakeRetriever, passage, review_kind, scripted_lm

__all__ = ["Q", "Call", "answering", "no_real_encoder", "passage", "review", "run", "tree_retriever"]


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
              missing: Callable[[Call], str] | None = None) -> Callable[[Call], dict | str]:
    """A full script: reviews by `review_fn`, MPC paragraphs by `missing`, fusion answers `answer`."""

    def script(call: Call):
        if call.kind == "review":
            return review_fn(call)
        if call.kind == "complete":
            return {"missing_paragraph": missing(call) if missing else f"missing after {call.titles[-1]}"}
        return {"answer": answer}

    return script


Q = "Who wrote the novel that the film Example was based on?"


@pytest.fixture(autouse=True)
def no_real_encoder(monkeypatch):
    """The recall re-ranking and a path judge must never load MiniLM in fast tests; tests that
    care pass `embed_fn`. (Autouse in every module that imports it.)"""
    def constant(texts):
        return np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2)

    monkeypatch.setattr("treeqa.programs.review_run.default_embed", constant)
    monkeypatch.setattr("treeqa.programs.judged.default_embed", constant)


def run(program, script, question=Q):
    """Run a ToR/CoR program under a scripted LM; returns the prediction and the engine."""
    lm, engine = scripted_lm(script, classify=review_kind, whole_call=True, usage=(1, 1))
    with dspy.context(lm=lm):
        pred = program(question=question)
    return pred, engine
