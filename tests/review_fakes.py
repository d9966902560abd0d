"""Scripted stand-ins for the Tree/Chain of Reviews tests: an LM whose replies a Python
function chooses from the parsed call, and a retriever that invents fresh paragraphs.

The LM goes through the real `dspy.LM` + `ChatAdapter` path (a custom engine, as
`treeqa.lm` does for llama.cpp), so parsing, the JSON-adapter fallback and call counts
are DSPy's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import dspy
import numpy as np
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from treeqa.data.corpus import Passage
from treeqa.retrievers.base import Retriever

_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]\n")


@dataclass
class Call:
    """One LM call as the script sees it."""

    kind: str  # "review", "complete" or "fuse"
    inputs: dict
    json_mode: bool
    messages: list[dict]

    @property
    def titles(self) -> list[str]:
        """Titles of the paragraphs shown (the part of each 'Title: text' before the colon)."""
        return [p.split(":", 1)[0] for p in self.inputs.get("paragraphs", [])]


def _kind(system: str) -> str:
    if "`missing_paragraph`" in system:
        return "complete"
    if "`relevant`" in system:
        return "review"
    if "`answer`" in system:
        return "fuse"
    raise AssertionError(f"unexpected signature in system prompt: {system[:200]}")


def _inputs(user: str) -> dict:
    user = user.split("\n\nRespond with", 1)[0]
    parts = _HEADER.split(user)
    values = {}
    for name, raw in zip(parts[1::2], parts[2::2], strict=True):
        raw = raw.strip()
        try:
            values[name] = json.loads(raw) if raw.startswith("[") else raw
        except json.JSONDecodeError:
            values[name] = raw
    return values


class ScriptedEngine:
    """Answers each call with `script(call)`: a dict of output fields, a raw string, or an exception."""

    def __init__(self, script: Callable[[Call], dict | str]):
        self.script = script
        self.calls: list[Call] = []

    def complete(self, request) -> Response:
        system = request.system or ""
        if not isinstance(system, str):
            system = "".join(getattr(part, "text", "") or "" for part in system)
        messages = [{"role": "system", "content": system}]
        messages += [{"role": m.role, "content": m.text or ""} for m in request.messages]
        call = Call(_kind(messages[0]["content"]), _inputs(messages[-1]["content"]),
                    bool(request.config.response_format), messages)
        self.calls.append(call)
        reply = self.script(call)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, dict):
            if call.json_mode:
                reply = json.dumps(reply)
            else:
                reply = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in reply.items()) + "[[ ## completed ## ]]"
        return Response(id="x", model="scripted", message=Message.assistant([TextPart(reply)]),
                        finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]


def scripted_lm(script: Callable[[Call], dict | str]) -> tuple[dspy.LM, ScriptedEngine]:
    engine = ScriptedEngine(script)
    return dspy.LM("local/scripted", engine=engine, cache=False, num_retries=0), engine


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


@dataclass
class FakeRetriever(Retriever):
    """Deterministic search: fixed results for the queries in `fixed`; any other query gets
    fresh paragraphs titled N1, N2, ... (the same ones when asked again)."""

    fixed: dict[str, list[Passage]] = field(default_factory=dict)
    queries: list[tuple[str, int]] = field(default_factory=list)
    _made: dict[str, list[Passage]] = field(default_factory=dict)
    _count: int = 0

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        self._check(queries, k)
        out = []
        for q in queries:
            self.queries.append((q, k))
            if q in self.fixed:
                out.append(self.fixed[q][:k])
                continue
            made = self._made.setdefault(q, [])
            while len(made) < k:
                self._count += 1
                made.append(passage(f"N{self._count}"))
            out.append(made[:k])
        return out


def passage(title: str, text: str | None = None) -> Passage:
    return Passage(id=title.lower(), title=title, text=text or f"Facts about {title}.")


Q = "Who wrote the novel that the film Example was based on?"


@pytest.fixture(autouse=True)
def no_real_encoder(monkeypatch):
    """The recall re-ranking must never load MiniLM in fast tests; tests that care pass `embed_fn`.
    (Autouse in every module that imports it.)"""
    monkeypatch.setattr("treeqa.programs.tree_of_reviews._default_embed",
                        lambda texts: np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2))


def run(program, script, question=Q):
    """Run a ToR/CoR program under a scripted LM; returns the prediction and the engine."""
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm):
        pred = program(question=question)
    return pred, engine
