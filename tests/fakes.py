"""Test doubles: a scripted LM whose every call is recorded, and a retriever without an index.

The scripted LM's reply comes from a Python function, which sees which output field is
asked for (`kind`: "answer", "confidence", "sub_questions", "evidence", "document",
"reasoning") and the input fields of the call, and returns a dict of output values, raw
text, or an exception to raise (a failed call).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage

from treeqa.data.corpus import Passage
from treeqa.lm import request_messages
from treeqa.retrievers.base import Retriever

_CHAT_FIRST_FIELD = re.compile(r"starting with the field `\[\[ ## (\w+) ## \]\]`")
_JSON_FIRST_FIELD = re.compile(r"order of fields: `(\w+)`")
_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.S)


@dataclass
class Call:
    kind: str
    inputs: dict[str, str]
    messages: list[dict]


def first_output_field(text: str) -> str:
    match = _CHAT_FIRST_FIELD.search(text) or _JSON_FIRST_FIELD.search(text)
    return match.group(1) if match else "?"


def chat_reply(values: dict) -> str:
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in values.items()]
    return "\n\n".join(parts + ["[[ ## completed ## ]]"])


class ScriptedEngine:
    """A DSPy engine (`complete(request) -> Response`) driven by `respond(kind, inputs)`."""

    def __init__(self, respond: Callable[[str, dict[str, str]], object]):
        self.respond = respond
        self.calls: list[Call] = []

    def complete(self, request) -> Response:
        messages = request_messages(request)
        last = messages[-1]["content"]
        kind = first_output_field(last)
        inputs = {name: value.strip() for name, value in _SECTION.findall(last)}
        self.calls.append(Call(kind, inputs, messages))
        out = self.respond(kind, inputs)
        if isinstance(out, BaseException):
            raise out
        text = out if isinstance(out, str) else chat_reply(out)
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=0, output_tokens=0))

    def kinds(self) -> list[str]:
        return [c.kind for c in self.calls]

    def close(self) -> None:
        pass


def scripted_lm(respond) -> tuple[dspy.LM, ScriptedEngine]:
    """An uncached dspy.LM over a ScriptedEngine, so every predictor call reaches the script."""
    engine = ScriptedEngine(respond)
    return dspy.LM("local/scripted", engine=engine, cache=False, num_retries=0), engine


class FakeRetriever(Retriever):
    """Returns k passages named after the query ("<query>|<i>"), so tests see what was found for what.

    With `shared_id`, every query also finds the same passage ("common") first."""

    def __init__(self, shared_id: bool = False):
        self.queries: list[str] = []
        self.shared_id = shared_id

    def search_batch(self, queries, k):
        self.queries.extend(queries)
        out = []
        for q in queries:
            hits = [Passage(f"{q}|{i}", f"{q} title {i}", f"text {i} about {q}", 1.0 - i / 10) for i in range(k)]
            if self.shared_id:
                hits[0] = Passage("common", "Common", "text 0 about common")
            out.append(hits)
        return out


class Overlap:
    """How many calls run at once: each wraps its work in `with overlap:` (which holds it for
    `hold` seconds, so that concurrent calls do meet); `peak` is the most seen together."""

    def __init__(self, hold: float):
        self.hold, self.active, self.peak = hold, 0, 0
        self._guard = threading.Lock()

    def __enter__(self):
        with self._guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.hold)

    def __exit__(self, *exc):
        with self._guard:
            self.active -= 1
