"""Structured output on the embedded engine: every signature's JSON schema, the grammar built
from it, and the token budget each predictor carries."""

import json

import dspy
import jsonschema
import pytest

from tests.fakes import tree_retriever
from treeqa.lm import LlamaEngine, adapter_for, get_lm
from treeqa.programs import PROGRAMS, build_program
from treeqa.signatures.answer import Answer, AnswerFromPassages
from treeqa.signatures.ask import Ask
from treeqa.signatures.budget import REASONING_TOKENS, budget
from treeqa.signatures.evidence import GenerateBackground, SummarizeEvidence
from treeqa.signatures.fusion import AnswerFromAnalyses, AnswerFromEvidence, AnswerFromParagraphs
from treeqa.signatures.review import CompleteMissingParagraph, ParagraphReview, ReviewWithReasoning
from treeqa.signatures.score import Score

REVIEW = {"relevant": True, "sufficient": False, "action": "search", "next_query": "q", "analysis": ""}
CASES = [  # signature, inputs, a valid output, an invalid output
    (Ask, {"question": "q", "history": "h", "max_questions": 2}, {"sub_questions": ["a?", "b?"]}, {"sub_questions": 3}),
    (Answer, {"question": "q", "history": "h"}, {"answer": "Paris"}, {}),
    (AnswerFromPassages, {"question": "q", "passages": ["p"]}, {"answer": "Paris"}, {"answer": 7}),
    (Score, {"question": "q", "history": "h", "answer": "a"}, {"confidence": 0.8}, {"confidence": "high"}),
    (SummarizeEvidence, {"question": "q", "passages": ["p"]}, {"evidence": "facts"}, {"evidence": ["facts"]}),
    (GenerateBackground, {"question": "q"}, {"document": "text"}, {"document": None}),
    (ParagraphReview, {"question": "q", "paragraphs": ["p"]}, REVIEW, {**REVIEW, "action": "maybe"}),
    (ReviewWithReasoning, {"question": "q", "paragraphs": ["p"]}, {"reasoning": "r", **REVIEW},
     {"reasoning": "r", **REVIEW, "relevant": "perhaps"}),
    (CompleteMissingParagraph, {"question": "q", "paragraphs": ["p"]}, {"missing_paragraph": "m"}, {"missing": "m"}),
    (AnswerFromAnalyses, {"question": "q", "analyses": ["a"]}, {"answer": "x"}, {"answer": {"x": 1}}),
    (AnswerFromParagraphs, {"question": "q", "paragraphs": ["p"]}, {"answer": "x"}, {}),
    (AnswerFromEvidence, {"question": "q", "evidence": ["e"]}, {"answer": "x"}, {"answer": False}),
]


class CapturingEngine(LlamaEngine):
    """The real engine's request handling up to llama.cpp; replies with a fixed JSON object."""

    def __init__(self, reply):
        self.reply, self.kwargs = reply, []

        class Fake:
            def create_chat_completion(inner, **kwargs):
                self.kwargs.append(kwargs)
                return {"choices": [{"message": {"content": json.dumps(reply)}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5}}

        super().__init__(llama=Fake())
        self.schemas = []

    def grammar_from_schema(self, schema_json):
        self.schemas.append(schema_json)
        return "grammar"


def _fix_inputs(signature, inputs):
    names = list(signature.input_fields)
    return {name: inputs.get(name, "x") for name in names}


@pytest.mark.parametrize("signature, inputs, valid, invalid", CASES, ids=[c[0].__name__ for c in CASES])
def test_schema_grammar_and_budget_reach_llama(signature, inputs, valid, invalid):
    engine = CapturingEngine(valid)
    lm = dspy.LM("local/capture", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm, adapter=adapter_for(lm)):
        pred = dspy.Predict(signature, max_tokens=budget(signature))(**_fix_inputs(signature, inputs))
    for key, value in valid.items():
        assert pred[key] == value
    (call,) = engine.kwargs
    assert call["max_tokens"] == budget(signature)
    assert "grammar" in call  # decoding is constrained, not just asked for JSON
    (schema_key,) = engine._grammars
    schema = json.loads(schema_key)
    # the grammar is built from the schema with the signature's field order (reasoning
    # before the answer, judgments before the analysis), never from a key-sorted copy
    (compiled,) = engine.schemas
    assert list(json.loads(compiled)["properties"]) == list(signature.output_fields)
    jsonschema.validate(valid, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(invalid, schema)


def test_adapter_choice():
    local = dspy.LM("local/capture", engine=CapturingEngine({"answer": "x"}), cache=False)
    assert isinstance(adapter_for(local), dspy.JSONAdapter)  # treeqa's, which can also write fine-tuning data
    remote = get_lm("openai/gpt-4o-mini")
    assert type(adapter_for(remote)) is dspy.ChatAdapter


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_predictor_carries_its_signature_budget(name):
    program = build_program(name, tree_retriever())
    predictors = program.named_predictors()
    assert predictors
    for pname, predictor in predictors:
        sig_budget = getattr(predictor.signature, "max_tokens", None)
        if sig_budget is None:  # a signature DSPy derived (ChainOfThought's `reasoning`, ReAct's steps)
            assert isinstance(predictor.config.get("max_tokens"), int) and predictor.config["max_tokens"] > 0, pname
            if name == "cot":
                assert predictor.config["max_tokens"] == budget(Answer) + REASONING_TOKENS
        else:
            assert predictor.config["max_tokens"] == sig_budget, pname


def test_greedy_grammar_sampler_is_used_only_for_plain_greedy_requests(monkeypatch):
    from treeqa.lm import _greedy_grammar as greedy_grammar

    made = []
    monkeypatch.setattr(greedy_grammar, "GreedyGrammarSampler",
                        lambda llama, grammar, top: made.append((grammar, top)) or "fast")

    class Llama:
        def _init_sampler(self, **kwargs):
            return "chain"

    llama = Llama()
    decoding = greedy_grammar.install(llama)
    assert llama._init_sampler(temp=0.0, grammar="g") == "fast"
    assert llama._init_sampler(temp=0.7, grammar="g") == "chain"  # sampling: llama.cpp's own chain
    assert llama._init_sampler(temp=0.0, grammar=None) == "chain"
    assert llama._init_sampler(temp=0.0, grammar="g", repeat_penalty=1.1) == "chain"
    decoding.top_logprobs = 5  # a request for log-probabilities: ours, with or without a grammar
    assert llama._init_sampler(temp=0.0, grammar=None) == "fast" and decoding.last == "fast"
    assert made == [("g", None), (None, 5)]




