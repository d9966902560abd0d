"""Scripted LMs and engines: one scripted engine behind a real `dspy.LM`, a responder for any
signature, and a stand-in for llama_cpp.Llama.

The engine goes through DSPy's own LM, adapters and parsing (a custom engine, as
`treeqa.lm` does for llama.cpp), so call counts and parse failures are DSPy's own. Each
call is parsed into a `Call` (its kind, its input fields, whether JSON was asked for, the
messages) and answered by a Python function: a dict of output values (written as JSON or
in the chat format, whichever the adapter asked for), raw text, or an exception to raise
(a failed call). A dict may carry `_p`: field -> the model's probability of `true` for a
boolean output, returned as token log-probabilities when the call asks for them (as the
embedded engine does). What "kind" a call is comes from a pluggable classifier: by default the
first output field asked for ("answer", "confidence", "sub_questions", "evidence",
"document", "reasoning", ...); `review_kind` names the Tree of Reviews signatures.

`run_scripted` asks a program one question under a scripted LM; a script's `Raw` reply is sent
as it is, not in the adapter's format.

`generic_responder` fills any signature's outputs from their types, for teleprompters
that call signatures of their own.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import dspy
from dspy._vendor.lm15.types import TokenLogprob, TopLogprob
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from treeqa.lm import request_messages

_CHAT_FIRST_FIELD = re.compile(r"starting with the field `\[\[ ## (\w+) ## \]\]`")
_JSON_FIRST_FIELD = re.compile(r"order of fields: `(\w+)`")
_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]\n")
_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)\nAll interactions", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*\)?)\)", re.M)
_BOOLEAN = re.compile(r"\b(true|false|True|False)\b")
_YES_NO = re.compile(r"\b(yes|no|Yes|No)\b")


@dataclass
class Call:
    """One LM call as a script sees it; list inputs (passages, paragraphs) are parsed."""

    kind: str
    inputs: dict
    json_mode: bool
    messages: list[dict]

    @property
    def titles(self) -> list[str]:
        """Titles of the paragraphs shown (the part of each 'Title: text' before the colon)."""
        return [p.split(":", 1)[0] for p in self.inputs.get("paragraphs", [])]


# --- classifiers: messages -> kind ----------------------------------------------------------

def first_output_field(messages: list[dict]) -> str:
    text = messages[-1]["content"]
    match = _CHAT_FIRST_FIELD.search(text) or _JSON_FIRST_FIELD.search(text)
    return match.group(1) if match else "?"


def review_kind(messages: list[dict]) -> str:
    """"review", "complete" (MPC), "bridge" (naming the bridge entity) or "fuse" for the
    Tree/Chain of Reviews signatures."""
    system = messages[0]["content"]
    if "`missing_paragraph`" in system:
        return "complete"
    if "`entity`" in system:
        return "bridge"
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


def chat_reply(values: dict) -> str:
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in values.items()]
    return "\n\n".join(parts + ["[[ ## completed ## ]]"])


class ScriptedEngine:
    """A DSPy engine (`complete(request) -> Response`) that answers each call with `respond(call)`."""

    def __init__(self, respond: Callable[[Call], object], classify: Callable[[list[dict]], str] = first_output_field,
                 usage: tuple[int, int] = (0, 0)):
        self.respond, self.classify, self.usage = respond, classify, usage
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def complete(self, request) -> Response:
        messages = request_messages(request)
        call = Call(self.classify(messages), _inputs(messages[-1]["content"]),
                    bool(getattr(request.config, "response_format", None)), messages)
        with self._lock:
            self.calls.append(call)
        out = self.respond(call)
        if isinstance(out, BaseException):
            raise out
        probabilities = p_yes = None
        if isinstance(out, dict):
            out = dict(out)
            probabilities = out.pop("_p", None)
            p_yes = out.pop("_p_yes", None)  # the answer's P("yes") against "no", for a yes/no answer
            booleans = [name for name, value in out.items() if isinstance(value, bool)]
            out = json.dumps(out) if call.json_mode else chat_reply(out)
        logprobs = None
        if probabilities is not None and getattr(request.config, "logprobs", None) is not None:
            logprobs = _token_logprobs(out, [probabilities.get(name) for name in booleans])
        if p_yes is not None and getattr(request.config, "logprobs", None) is not None:
            logprobs = _yes_no_logprobs(out, p_yes)
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(out)]),
                        finish_reason="stop", usage=Usage(input_tokens=self.usage[0], output_tokens=self.usage[1]),
                        logprobs=logprobs)

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def kinds(self) -> list[str]:
        return [c.kind for c in self.calls]

    def of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]


def _token_logprobs(text: str, probabilities: list) -> tuple[TokenLogprob, ...]:
    """`text` as tokens: each boolean value one token, whose alternatives carry the n-th
    boolean's probability of true; the rest whole pieces with log-probability 0."""
    tokens, booleans = [], iter(probabilities)
    for i, piece in enumerate(_BOOLEAN.split(text)):
        if i % 2 == 0:
            if piece:
                tokens.append(TokenLogprob(token=piece, logprob=0.0))
            continue
        p = next(booleans, None)
        if p is None:
            tokens.append(TokenLogprob(token=piece, logprob=0.0))
            continue
        true, false = math.log(max(p, 1e-12)), math.log(max(1 - p, 1e-12))
        spell = str.capitalize if piece[0].isupper() else str.lower  # the chosen token is among its alternatives
        tokens.append(TokenLogprob(token=piece, logprob=true if piece.lower() == "true" else false,
                                   top=(TopLogprob(token=spell("true"), logprob=true),
                                        TopLogprob(token=spell("false"), logprob=false))))
    return tuple(tokens)


def _yes_no_logprobs(text: str, p_yes: float) -> tuple[TokenLogprob, ...]:
    """`text` as three tokens: what comes before the answer's yes or no, that word (its
    alternatives "yes" at `p_yes` and "no"), and the rest."""
    match = _YES_NO.search(text, text.find("answer"))
    if match is None:  # another answer: one token, no yes/no alternatives
        return (TokenLogprob(token=text, logprob=0.0),)
    yes, no = math.log(max(p_yes, 1e-12)), math.log(max(1 - p_yes, 1e-12))
    word = match.group(1)
    return (TokenLogprob(token=text[:match.start()], logprob=0.0),
            TokenLogprob(token=word, logprob=yes if word.lower() == "yes" else no,
                         top=(TopLogprob(token="yes", logprob=yes), TopLogprob(token="no", logprob=no))),
            TokenLogprob(token=text[match.end():], logprob=0.0))


def scripted_lm(respond, classify=first_output_field, whole_call: bool = False,
                usage: tuple[int, int] = (0, 0)) -> tuple[dspy.LM, ScriptedEngine]:
    """An uncached dspy.LM over a ScriptedEngine. `respond(kind, inputs)` by default;
    `respond(call)` with `whole_call=True`."""
    engine = ScriptedEngine(respond if whole_call else (lambda call: respond(call.kind, call.inputs)),
                            classify, usage)
    return dspy.LM("local/scripted", engine=engine, cache=False, num_retries=0), engine


class Raw(str):
    """A reply a script sends as it is, not in the adapter's format (a reply that does not parse)."""


def run_scripted(program, respond, question: str) -> tuple[dspy.Prediction, ScriptedEngine]:
    """Ask `program` the question under `scripted_lm(respond)`; the prediction and the engine.
    A prediction with a search tree must be able to write it as JSON (the tree is plain data)."""
    lm, engine = scripted_lm(respond)
    with dspy.context(lm=lm):
        pred = program(question=question)
    if "tree" in pred:
        json.dumps(pred.tree)
    return pred, engine


# --- a responder for any signature ------------------------------------------------------------

def generic_responder(answers: dict[str, str] | None = None, default_answer: str = "unknown"):
    """Fills every output field DSPy asks for with a value of its type (bool True, a Literal's
    first option, 0.9, a one-item list, a one-key dict) and answers from `answers` (a substring of the prompt
    -> the answer given)."""
    answers = answers or {}

    def value(name: str, kind: str, user: str) -> str:
        if kind.startswith("Literal["):
            return re.findall(r"'([^']*)'", kind)[0]
        if kind == "bool":
            return "True"
        if kind in ("float", "int"):
            return "0.9" if kind == "float" else "1"
        if kind.startswith("list["):
            return '["a follow-up question"]'
        if kind.startswith("dict["):  # a tool's arguments (ReAct): one query
            return '{"query": "a follow-up question"}'
        if name == "answer":
            return next((a for key, a in answers.items() if key in user), default_answer)
        return f"Some {name.replace('_', ' ')}: answer with one short entity."

    def respond(call: Call) -> str:
        system = call.messages[0]["content"] if call.messages[0]["role"] == "system" else ""
        block = _OUTPUTS.search(system)
        fields = _FIELD.findall(block.group(1)) if block else [("answer", "str")]
        user = call.messages[-1]["content"]
        text = "".join(f"[[ ## {n} ## ]]\n{value(n, k, user)}\n\n" for n, k in fields)
        return text + "[[ ## completed ## ]]"

    return respond


def generic_lm(answers: dict[str, str] | None = None, **kw) -> dspy.LM:
    """An LM that answers any signature (see `generic_responder`); its engine is `lm._engine_spec`."""
    engine = ScriptedEngine(generic_responder(answers, **kw), usage=(10, 5))
    return dspy.LM("local/generic", engine=engine, cache=False, num_retries=0)


def use_lm(monkeypatch, lm: dspy.LM) -> dspy.LM:
    """Make every LM treeqa builds for this test (`treeqa.lm.get_lm`, whatever the name) be `lm`."""
    import treeqa.lm

    monkeypatch.setattr(treeqa.lm, "get_lm", lambda name, **kw: lm)
    return lm


# --- a stand-in for llama_cpp.Llama ------------------------------------------------------------

class FakeLlama:
    """Stands in for llama_cpp.Llama: records calls, 'evaluates' tokens, answers in DSPy's chat format."""

    def __init__(self, reply="[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", delay=0.0):
        self.reply, self.delay = reply, delay
        self.calls, self.active, self.max_active = [], 0, 0
        self._guard = threading.Lock()

    def eval(self, tokens):
        pass

    def create_chat_completion(self, **kwargs):
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.calls.append(kwargs)
        self.eval(list(range(30)))  # pretend 30 of the prompt tokens were not in the cache
        for _ in range(4):  # each generated token but the last is fed back
            self.eval([0])
        time.sleep(self.delay)
        with self._guard:
            self.active -= 1
        return {"id": "x", "model": "fake",
                "choices": [{"message": {"content": self.reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 5}}
