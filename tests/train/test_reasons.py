"""Reasons the model finds itself: kept when they reach the gold answer, a hinted attempt kept
only when it names the answer without giving the hint away, resumable, trained in the
reasoning reader's prompt."""

import json

import dspy

from tests.fakes.lm import Raw, scripted_lm
from treeqa.lm import TrainableJSONAdapter
from treeqa.train.reads import hashed_order
from treeqa.train.reasons import (
    find_reasons,
    gives_away,
    names_answer,
    read_reasons,
    reasoned_chats,
    without_giveaways,
)


def read(i: int, answer: str) -> dict:
    return {"id": f"q{i}:gold", "question": f"Question {i}?", "passages": [f"P{i}: text"], "answer": answer}


def respond(kind, inputs):
    """q0: right at once; q1: wrong, then a good hinted reason; q2: wrong, the hint given away;
    q3: wrong, a hinted reason that never names the answer."""
    q = inputs["question"]
    if "correct_answer" not in inputs:
        right = q == "Question 0?"
        return {"reasoning": f"P says so for {q}", "answer": "Paris" if right else "Rome"}
    reasons = {"Question 1?": "P1 says the city is Paris.", "Question 2?": "The hint says Paris.",
               "Question 3?": "P3 names a city.", "Question 4?": "The correct answer is Paris. P4 says it is Paris."}
    return {"reasoning": reasons[q], "answer": "Paris"}


def test_reasons_are_found_rationalised_or_refused(tmp_path):
    lm, engine = scripted_lm(respond)
    reads = [read(i, "Paris") for i in range(5)]
    with dspy.context(lm=lm):
        counts = find_reasons(reads, tmp_path / "reasons.jsonl", progress=False)
    assert counts == {"found": 1, "rationalised": 2, "none": 2}
    assert len(engine.calls) == 1 + 2 * 4  # the hint only where the reader missed
    kept = read_reasons(tmp_path / "reasons.jsonl")
    assert kept["q1:gold"] == {"how": "rationalised", "reasoning": "P1 says the city is Paris.", "said": "Rome"}
    # the sentence that gives the hint away is dropped; the reasoning after it is kept
    assert kept["q4:gold"]["reasoning"] == "P4 says it is Paris."
    refused = {r["id"]: r for r in map(json.loads, (tmp_path / "reasons.jsonl").read_text().splitlines())}
    assert refused["q2:gold"]["refused"] == "The hint says Paris." and kept["q2:gold"]["reasoning"] == ""


def test_a_rerun_resumes_and_a_torn_line_is_redone(tmp_path):
    out = tmp_path / "reasons.jsonl"
    lm, engine = scripted_lm(respond)
    with dspy.context(lm=lm):
        find_reasons([read(0, "Paris"), read(1, "Paris")], out, progress=False)
    out.write_text(out.read_text().splitlines()[0] + "\n" + '{"id": "q1:gold", "how"\n')
    lm, engine = scripted_lm(respond)
    with dspy.context(lm=lm):
        counts = find_reasons([read(0, "Paris"), read(1, "Paris")], out, progress=False)
    assert counts == {"found": 1, "rationalised": 1}
    assert [c.inputs["question"] for c in engine.calls] == ["Question 1?", "Question 1?"]


def test_the_checks_on_a_reasoning():
    assert names_answer("so it is The Beatles.", "Beatles") and not names_answer("a band", "Beatles")
    # words, not letters: a "no" hidden in "not" or "known" is no answer
    assert not names_answer("X is not known to be Y's director", "no")
    assert names_answer("X is American and Y is British, so no.", "no")
    assert not names_answer("Parisian bakers", "Paris") and names_answer("born in Paris, France", "Paris")
    assert names_answer("Kerr Van Cleve Smith appeared in Pressure.", "Kerr Smith")
    assert not names_answer("Will Smith appeared in Pressure.", "Kerr Smith")
    assert gives_away("Given the hint, it is Paris") and gives_away("The correct answer is Paris")
    assert not gives_away("P1 says the capital is Paris.")
    assert without_giveaways("The correct answer is Paris. P1 says so! Given the hint, yes.") == "P1 says so!"


def test_reasoned_chats_use_the_reasoning_readers_prompt_and_the_gold_answer():
    reads = [read(0, "Paris"), read(1, "Paris")]
    chats, without = reasoned_chats(reads, {"q0:gold": {"how": "found", "reasoning": "P0 says Paris."},
                                            "q1:gold": {"how": "none", "reasoning": ""}}, TrainableJSONAdapter())
    assert without == 1 and len(chats) == 1
    reply = json.loads(chats[0]["messages"][-1]["content"])
    assert reply == {"reasoning": "P0 says Paris.", "answer": "Paris"}
    assert "reasoning" in chats[0]["messages"][0]["content"] and "Question 0?" in chats[0]["messages"][-2]["content"]


def test_a_reply_that_does_not_parse_is_a_recorded_failure_of_that_read_only(tmp_path):
    def garbled(kind, inputs):
        if "correct_answer" in inputs:
            return {"reasoning": f"{inputs['passages'][0]} says Paris.", "answer": "Paris"}
        return Raw("the model ran out of tokens half way through its reasoning")

    lm, _ = scripted_lm(garbled)
    out = tmp_path / "reasons.jsonl"
    with dspy.context(lm=lm):
        counts = find_reasons([read(0, "Paris"), read(1, "Paris")], out, progress=False)
    assert counts == {"rationalised": 2}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [f["where"] for f in lines[0]["failures"]] == ["reason"]


def test_the_reasons_order_is_a_hash_of_the_ids_so_a_prefix_is_a_fair_sample_and_stays_put():
    reads = [read(i, "Paris") for i in range(40)]
    order = [r["id"] for r in hashed_order(reads)]
    assert order == [r["id"] for r in hashed_order(list(reversed(reads)))]
    assert order != [r["id"] for r in reads] and sorted(order) == sorted(r["id"] for r in reads)
    grown = [r["id"] for r in hashed_order(reads + [read(i, "Paris") for i in range(40, 80)])]
    assert [i for i in grown if i in set(order)] == order  # a larger set keeps the smaller one's order


def test_a_read_missing_a_gold_paragraph_gets_no_hinted_attempt(tmp_path):
    lm, engine = scripted_lm(respond)
    reads = [{**read(1, "Paris"), "id": f"q1:{kind}", "kind": kind} for kind in ("gold", "own", "partial", "missed")]
    with dspy.context(lm=lm):
        counts = find_reasons(reads, tmp_path / "reasons.jsonl", progress=False)
    assert counts == {"rationalised": 2, "none": 2}  # the hint would have "reasoned" its way there on all four
    assert len(engine.calls) == 4 + 2
