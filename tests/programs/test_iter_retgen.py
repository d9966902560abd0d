"""ITER-RETGEN: a fixed number of rounds, each searching with the question and the previous round's
generation and answering from its own passages; the last round's answer is the answer. A round
that would repeat the one before is not run; a failed generation is answered again without
reasoning, and a round where that fails too ends the search."""

import json

import dspy
import pytest

from tests.fakes import FakeRetriever, Raw, run_scripted, scripted_lm
from treeqa.programs import build_program, call_bound
from treeqa.programs.iter_retgen import IterRetGen
from treeqa.signatures.iter_retgen import MAX_GENERATION_CHARS, generation_text, round_query
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot

Q = "Where was the director of Jaws born?"
R1 = ("Jaws was directed by Steven Spielberg.", "Steven Spielberg")
R2 = ("Spielberg was born in Cincinnati, Ohio.", "Cincinnati")
R3 = ("The director of Jaws, Steven Spielberg, was born in Cincinnati.", "Cincinnati, Ohio")


def rounds(replies, answers=()):
    """A script: the n-th generation is replies[n], a (reasoning, answer) pair, an exception or `Raw`
    text; the n-th answer-only retry is answers[n] (an answer, an exception or `Raw` text)."""
    def respond(kind, inputs):
        if kind == "answer":
            reply = answers[respond.retries]
            respond.retries += 1
            return {"answer": reply} if type(reply) is str else reply  # Raw text goes as it is
        assert kind == "reasoning", kind
        reply = replies[respond.n]
        respond.n += 1
        if isinstance(reply, tuple):
            return {"reasoning": reply[0], "answer": reply[1]}
        return reply
    respond.n = respond.retries = 0
    return respond


def query_after(reply):
    return f"{Q} {reply[0]} {reply[1]}"


def run(program, respond):
    return run_scripted(program, respond, Q)


def test_defaults_bound_and_bad_settings():
    program = IterRetGen(FakeRetriever())
    assert (program.rounds, program.k, program.passage_chars) == (3, 5, 1000)
    assert call_bound("iterretgen") == 6 and call_bound("iterretgen", {"rounds": 5}) == 10
    assert [name for name, _ in program.named_predictors()] == ["generate", "answer_only"]
    assert list(program.generate.signature.output_fields) == ["reasoning", "answer"]
    with pytest.raises(ValueError, match="retriever"):
        IterRetGen()
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        IterRetGen(FakeRetriever(), rounds=0)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        IterRetGen(FakeRetriever(), k=2.5)
    with pytest.raises(ValueError, match="question is empty"):
        program(question="")


def test_each_round_searches_with_the_question_and_the_last_generation():
    retriever = FakeRetriever()
    pred, engine = run(IterRetGen(retriever), rounds([R1, R2, R3]))
    queries = [Q, query_after(R1), query_after(R2)]
    assert engine.kinds() == ["reasoning"] * 3
    assert retriever.queries == [(q, 5) for q in queries]
    for call, query in zip(engine.calls, queries, strict=True):  # each round reads its own passages only
        assert call.inputs["question"] == Q
        assert call.inputs["passages"] == [f"{query} title {i}: text {i} about {query}" for i in range(5)]
    assert pred.answer == "Cincinnati, Ohio" and pred.failures == []  # the last round's, not the first's
    assert [(g["round"], g["query"], g["answer"]) for g in pred.generations] == [
        (1, queries[0], "Steven Spielberg"), (2, queries[1], "Cincinnati"), (3, queries[2], "Cincinnati, Ohio")]
    assert [p.id for p in pred.retrieved] == [f"{q}|{i}" for q in queries for i in range(5)]
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "search", "accept"]
    assert [n["retrieved_by"] for n in nodes] == queries and [n["parent"] for n in nodes] == [None, 0, 1]
    assert nodes[2]["ids"] == [f"{queries[2]}|{i}" for i in range(5)]
    assert nodes[0]["analysis"] == f"{R1[0]}\nanswer: Steven Spielberg"
    assert pred.tree["stats"] == {"steps": 3, "stop": "rounds", "retrievals": 3, "rounds_run": 3, "answer_from": 3}
    assert pred.stats == pred.tree["stats"]


def test_the_round_bound_is_the_call_count():
    retriever = FakeRetriever()
    program = IterRetGen(retriever, rounds=4, k=2)
    replies = [(f"Fact {i} holds.", f"answer {i}") for i in range(1, 9)]
    pred, engine = run(program, rounds(replies))
    assert len(engine.calls) == 4 == call_bound("iterretgen", program.settings) / 2
    assert retriever.queries == [(Q, 2)] + [(query_after(r), 2) for r in replies[:3]]
    assert pred.answer == "answer 4" and pred.tree["stats"]["stop"] == "rounds"
    pred, engine = run(IterRetGen(FakeRetriever(), rounds=1), rounds(replies))
    assert len(engine.calls) == 1 and pred.answer == "answer 1"
    assert [n["action"] for n in pred.tree["nodes"]] == ["accept"]


def test_a_round_that_generates_what_the_round_before_did_ends_the_search():
    retriever = FakeRetriever()
    pred, engine = run(IterRetGen(retriever, rounds=4), rounds([R1, R2, R2, R3]))
    assert len(engine.calls) == 3  # a fourth round would search query_after(R2) again and read the same
    assert retriever.asked == [Q, query_after(R1), query_after(R2)]
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "search", "accept"]
    assert "stopped" in nodes[2]["analysis"]
    assert pred.tree["stats"]["stop"] == "converged" and pred.answer == "Cincinnati"


def test_a_failed_generation_is_answered_again_without_reasoning():
    # a reasoning cut off at the token budget leaves JSON that does not parse (the embedded
    # model's adapter: one call per failure, no retry in another format)
    def json_reply(**fields):
        return Raw(json.dumps(fields))

    retriever = FakeRetriever()
    cut = Raw('{"reasoning": "Jaws was directed by Steven Spielberg, who was born in')
    script = rounds([json_reply(reasoning=R1[0], answer=R1[1]), cut, json_reply(reasoning=R3[0], answer=R3[1])],
                    answers=[json_reply(answer="Spielberg")])
    with dspy.context(adapter=dspy.JSONAdapter()):
        pred, engine = run(IterRetGen(retriever), script)
    assert engine.kinds() == ["reasoning", "reasoning", "answer", "reasoning"]
    assert engine.calls[2].inputs["passages"] == engine.calls[1].inputs["passages"]  # the same round's passages
    assert [f["where"] for f in pred.failures] == ["generate@round2"]
    # the retry's answer is the round's generation: the next round searches with it
    assert retriever.asked == [Q, query_after(R1), f"{Q} Spielberg"]
    assert pred.generations[1] == {"round": 2, "query": query_after(R1), "reasoning": "", "answer": "Spielberg"}
    node = pred.tree["nodes"][1]
    assert node["action"] == "search" and node["analysis"].startswith("[the generation failed")
    assert node["failures"][0]["error"] == "AdapterParseError"
    assert pred.answer == "Cincinnati, Ohio" and pred.tree["stats"]["stop"] == "rounds"
    assert len(engine.calls) <= call_bound("iterretgen")


def test_a_round_whose_retry_fails_too_ends_the_search_and_the_latest_answer_stands():
    retriever = FakeRetriever()
    pred, engine = run(IterRetGen(retriever), rounds([R1, TimeoutError("slow"), R3], answers=[TimeoutError("slower")]))
    assert len(engine.calls) == 3 and retriever.asked == [Q, query_after(R1)]
    assert [f["where"] for f in pred.failures] == ["generate@round2", "answer_only@round2"]
    node = pred.tree["nodes"][1]
    assert node["action"] == "reject" and node["retrieved_by"] == query_after(R1) and len(node["ids"]) == 5
    assert ["slow" in f["message"] for f in node["failures"]] == [True, True]
    assert pred.answer == "Steven Spielberg"
    assert (pred.tree["stats"]["stop"], pred.tree["stats"]["answer_from"], pred.tree["stats"]["rounds_run"]) == (
        "failed", 1, 1)
    assert len(pred.retrieved) == 10


def test_a_blank_or_garbage_reply_does_not_crash_the_program():
    garbage = Raw("%%% not the format at all")
    pred, engine = run(IterRetGen(FakeRetriever()), rounds([garbage] * 4, answers=[garbage] * 4))
    assert [(f["where"], f["error"]) for f in pred.failures] == [
        ("generate@round1", "AdapterParseError"), ("answer_only@round1", "AdapterParseError")]
    assert pred.answer == "" and pred.tree["stats"]["answer_from"] is None and pred.tree["stats"]["stop"] == "failed"
    # a round that writes nothing keeps the answer of the round before, and the next round would
    # repeat its query and read the same again, so the search stops there
    pred, engine = run(IterRetGen(FakeRetriever()), rounds([R1, ("  ", ""), R3]))
    assert len(engine.calls) == 2 and pred.tree["stats"]["stop"] == "converged"
    assert pred.answer == "Steven Spielberg" and pred.tree["stats"]["answer_from"] == 1
    assert pred.tree["nodes"][1]["analysis"].startswith("no answer")
    pred, engine = run(IterRetGen(FakeRetriever()), rounds([("", ""), R3]))
    assert len(engine.calls) == 1 and pred.tree["stats"]["stop"] == "converged" and pred.answer == ""
    # an answer without reasoning is a generation: the next round searches with it
    retriever = FakeRetriever()
    pred, engine = run(IterRetGen(retriever, rounds=2), rounds([("", "Spielberg"), R2]))
    assert retriever.asked == [Q, f"{Q} Spielberg"] and pred.answer == "Cincinnati"


def test_the_generation_and_the_query():
    assert generation_text(" Jaws was\n directed by  Spielberg. ", "Spielberg") == (
        "Jaws was directed by Spielberg. Spielberg")
    assert generation_text("", "") == "" and generation_text(None, "x") == "x"
    assert len(generation_text("word " * 1000, "x")) <= MAX_GENERATION_CHARS
    assert round_query(Q, "") == Q and round_query(Q, "Spielberg") == f"{Q} Spielberg"


def test_a_passage_found_in_several_rounds_is_retrieved_once():
    pred, _ = run(IterRetGen(FakeRetriever(shared_id=True)), rounds([R1, R2, R3]))
    nodes = pred.tree["nodes"]
    assert all(n["ids"][0] == "common" for n in nodes)
    assert len(pred.retrieved) == 1 + 3 * 4 and pred.retrieved[0].id == "common"


def test_annotated_demos_go_to_the_generator(train, tmp_path):
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call while building demos"))
    with dspy.context(lm=lm):
        compiled = AnnotatedFewShot(k=3, seed=0).compile(build_program("iterretgen", FakeRetriever()), trainset=hotpot)
    assert engine.calls == []
    demos = compiled.generate.demos
    assert len(demos) == 3 and {d.answer for d in demos} == {"Vitznau", "1871", "Lake Lucerne"}
    assert all(set(d.keys()) == {"question", "passages", "answer"} and len(d.passages) == 2 for d in demos)
    compiled.save(str(tmp_path / "iterretgen.json"))
    fresh = IterRetGen(FakeRetriever())
    fresh.load(str(tmp_path / "iterretgen.json"))
    assert fresh.dump_state() == compiled.dump_state()
    # a demo without reasoning still makes a well-formed prompt
    lm, engine = scripted_lm(rounds([R1, R2, R3]))
    with dspy.context(lm=lm):
        assert compiled(question=Q).answer == "Cincinnati, Ohio"
    assert any("Vitznau" in m["content"] for m in engine.calls[0].messages[1:-1])  # shown as a demo
