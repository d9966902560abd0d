"""The ALLIES signatures: typed fields, and outputs a small model writes parse as intended."""

import dspy
import pytest
from dspy.utils.exceptions import AdapterParseError
from pydantic import TypeAdapter

from tests.fakes import scripted_lm
from treeqa.signatures.answer import Answer, AnswerFromPassages
from treeqa.signatures.ask import Ask, parse_questions
from treeqa.signatures.evidence import GenerateBackground, SummarizeEvidence
from treeqa.signatures.score import Score, parse_confidence


@pytest.mark.parametrize("raw, expected", [
    (0.8, 0.8),
    ("0.8", 0.8),
    ("0.8.", 0.8),
    ("Confidence: 0.8", 0.8),
    ("The score is: 0.65 (fairly sure)", 0.65),
    ("80%", 0.8),
    (".9", 0.9),
    ("1.5", 1.0),
    (7, 1.0),
    ("-0.2", 0.0),
    ([0.3], 0.3),
    (0, 0.0),
])
def test_parse_confidence_reads_and_clamps(raw, expected):
    assert parse_confidence(raw) == pytest.approx(expected)


@pytest.mark.parametrize("raw", ["garbage", "", "high", None, True, float("nan"), {"p": 0.5}])
def test_parse_confidence_rejects_text_without_a_number(raw):
    with pytest.raises(ValueError):
        parse_confidence(raw)


@pytest.mark.parametrize("raw, expected", [
    (["Who is X?", " When was Y? "], ["Who is X?", "When was Y?"]),
    ("1. Who is X?\n2. When was Y?", ["Who is X?", "When was Y?"]),
    ("Ranked Questions:\n1) Who is X?\n\n- When was Y?", ["Who is X?", "When was Y?"]),
    ("Who is X?", ["Who is X?"]),
    ("", []),
])
def test_parse_questions_accepts_lists_and_numbered_lines(raw, expected):
    assert parse_questions(raw) == expected


def test_parse_questions_rejects_non_text():
    with pytest.raises(ValueError):
        parse_questions(3.0)


@pytest.mark.parametrize("signature, inputs, outputs", [
    (Ask, ["question", "history", "max_questions"], ["sub_questions"]),
    (Answer, ["question", "history"], ["answer"]),
    (AnswerFromPassages, ["question", "passages"], ["answer"]),
    (Score, ["question", "history", "answer"], ["confidence"]),
    (SummarizeEvidence, ["question", "passages"], ["evidence"]),
    (GenerateBackground, ["question"], ["document"]),
])
def test_signature_fields(signature, inputs, outputs):
    assert list(signature.input_fields) == inputs
    assert list(signature.output_fields) == outputs
    assert len(signature.instructions) > 40


def test_output_types_are_typed_and_keep_their_parsers():
    assert TypeAdapter(Ask.output_fields["sub_questions"].annotation).json_schema()["type"] == "array"
    assert TypeAdapter(Score.output_fields["confidence"].annotation).json_schema()["type"] == "number"
    assert TypeAdapter(Score.output_fields["confidence"].annotation).validate_python("0.8.") == 0.8
    assert Answer.output_fields["answer"].annotation is str


@pytest.mark.parametrize("raw, expected", [("0.8.", 0.8), ("Confidence: 0.8", 0.8), ("1.7", 1.0), ("75%", 0.75)])
def test_score_through_the_chat_adapter(raw, expected):
    lm, engine = scripted_lm(lambda kind, inputs: {"confidence": raw})
    with dspy.context(lm=lm):
        pred = dspy.Predict(Score)(question="q?", history="(none yet)", answer="a")
    assert pred.confidence == pytest.approx(expected)
    assert len(engine.calls) == 1  # parsed at once, no JSON-adapter retry


def test_garbage_score_is_a_parse_error():
    lm, engine = scripted_lm(lambda kind, inputs: {"confidence": "not sure at all"})
    with dspy.context(lm=lm), pytest.raises(AdapterParseError):
        dspy.Predict(Score)(question="q?", history="(none yet)", answer="a")


def test_ask_through_the_chat_adapter_reads_a_numbered_list():
    lm, _ = scripted_lm(lambda kind, inputs: {"sub_questions": "1. Who is X?\n2. Where is Y?"})
    with dspy.context(lm=lm):
        pred = dspy.Predict(Ask)(question="q?", history="(none yet)", max_questions=2)
    assert pred.sub_questions == ["Who is X?", "Where is Y?"]


def test_rewritten_instructions_keep_the_parsers():
    """Optimizers rebuild signatures (with_instructions); the lenient output types must survive."""
    lm, _ = scripted_lm(lambda kind, inputs: {"confidence": "Confidence: 0.4."})
    with dspy.context(lm=lm):
        pred = dspy.Predict(Score.with_instructions("Rate the answer."))(question="q", history="h", answer="a")
    assert pred.confidence == pytest.approx(0.4)
    annotation = Ask.with_instructions("Ask.").output_fields["sub_questions"].annotation
    assert TypeAdapter(annotation).validate_python("1. a?\n2. b?") == ["a?", "b?"]
