"""A scripted LM that answers any signature: it reads the output fields DSPy asks for and
fills each with a value of its type, and answers questions from a lookup table.

Teleprompters call signatures of their own (instruction proposers, reflection), so their
tests need an LM that does not have to be told each prompt in advance.
"""

from __future__ import annotations

import re

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage

from treeqa.lm import request_messages

_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)\nAll interactions", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*\)?)\)", re.M)


class GenericEngine:
    """Answers every call; `answers` maps a substring of the question to the answer given."""

    def __init__(self, answers: dict[str, str] | None = None, default_answer: str = "unknown"):
        self.answers = answers or {}
        self.default_answer = default_answer
        self.calls: list[list[dict]] = []

    def _value(self, name: str, kind: str, user: str) -> str:
        if kind.startswith("Literal["):
            return re.findall(r"'([^']*)'", kind)[0]
        if kind == "bool":
            return "True"
        if kind in ("float", "int"):
            return "0.9" if kind == "float" else "1"
        if kind.startswith("list["):
            return '["a follow-up question"]'
        if name == "answer":
            return next((a for key, a in self.answers.items() if key in user), self.default_answer)
        return f"Some {name.replace('_', ' ')}: answer with one short entity."

    def complete(self, request) -> Response:
        messages = request_messages(request)
        self.calls.append(messages)
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        block = _OUTPUTS.search(system)
        fields = _FIELD.findall(block.group(1)) if block else [("answer", "str")]
        user = messages[-1]["content"]
        text = "".join(f"[[ ## {n} ## ]]\n{self._value(n, k, user)}\n\n" for n, k in fields)
        return Response(id=None, model="generic", message=Message.assistant([TextPart(text + "[[ ## completed ## ]]")]),
                        finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=5))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self):
        pass


def generic_lm(answers: dict[str, str] | None = None, **kw) -> dspy.LM:
    return dspy.LM("local/generic", engine=GenericEngine(answers, **kw), cache=False, num_retries=0)
