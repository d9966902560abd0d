"""IRCoT: each reasoning sentence is the next query; a stated answer, the step bound, a repeat,
a blank or failed reply end the chain; a separate reader answers from what was collected."""

import dspy
import pytest

from tests.fakes import FakeRetriever, Raw, run_scripted, scripted_lm
from treeqa.programs import build_program, call_bound
from treeqa.programs.ircot import IRCoT
from treeqa.signatures.ircot import NO_REASONING_YET, concluded_answer, first_sentence
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot

Q = "Where was the director of Jaws born?"
S1 = "Jaws was directed by Steven Spielberg."
S2 = "Steven Spielberg was born in Cincinnati."
S3 = "So the answer is: Cincinnati."


def reasoning(sentences, answer="Cincinnati"):
    """A script: the n-th reasoning call writes sentences[n] (a sentence, an exception or `Raw` text)."""
    def respond(kind, inputs):
        if kind == "next_sentence":
            reply = sentences[respond.steps]
            respond.steps += 1
            return {"next_sentence": reply} if type(reply) is str else reply
        assert kind == "answer", kind
        return answer if isinstance(answer, BaseException) else {"answer": answer}
    respond.steps = 0
    return respond


def run(program, respond):
    return run_scripted(program, respond, Q)


def test_defaults_bound_and_bad_settings():
    program = IRCoT(FakeRetriever())
    assert (program.k, program.max_steps, program.max_passages) == (5, 4, 15)
    assert call_bound("ircot") == 5 and call_bound("ircot", {"max_steps": 2}) == 3
    assert [name for name, _ in program.named_predictors()] == ["reason", "answer"]
    with pytest.raises(ValueError, match="retriever"):
        IRCoT()
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
        IRCoT(FakeRetriever(), max_steps=0)
    with pytest.raises(ValueError, match=r"max_passages \(3\) must be at least k \(5\)"):
        IRCoT(FakeRetriever(), max_passages=3)
    with pytest.raises(ValueError, match="question is empty"):
        program(question="  ")


def test_each_sentence_retrieves_until_one_states_the_answer():
    retriever = FakeRetriever()
    pred, engine = run(IRCoT(retriever), reasoning([S1 + " He also made E.T.", S2, S3]))
    assert engine.kinds() == ["next_sentence"] * 3 + ["answer"]
    assert retriever.queries == [(Q, 5), (S1, 5), (S2, 5)]  # only the first sentence of a reply is the query
    steps = engine.of("next_sentence")
    assert [c.inputs["reasoning_so_far"] for c in steps] == [NO_REASONING_YET, S1, f"{S1} {S2}"]
    assert [len(c.inputs["passages"]) for c in steps] == [5, 10, 15]  # the collection grows by each search
    assert steps[1].inputs["passages"][5].startswith(f"{S1} title 0: text 0 about {S1}")
    reader = engine.of("answer")[0]
    assert len(reader.inputs["passages"]) == 15 and reader.inputs["question"] == Q
    assert pred.answer == "Cincinnati" and pred.reasoning == [S1, S2, S3] and pred.failures == []
    assert [p.id for p in pred.retrieved] == [f"{q}|{i}" for q in (Q, S1, S2) for i in range(5)]
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "search", "search", "accept"]
    assert [n["retrieved_by"] for n in nodes] == [Q, S1, S2, None]
    assert [n["parent"] for n in nodes] == [None, 0, 1, 2]
    assert nodes[1]["titles"] == [f"{S1} title {i}" for i in range(5)] and nodes[1]["analysis"] == S1
    assert nodes[3]["analysis"] == f"{S3}\nanswer: Cincinnati" and nodes[3]["ids"] == []
    stats = pred.tree["stats"]
    assert (stats["stop"], stats["retrievals"], stats["reasoning_steps"], stats["answer_from"]) == (
        "answered", 3, 3, "reader")
    assert pred.stats == stats


def test_the_step_bound_stops_the_chain_and_its_last_sentence_is_not_searched():
    retriever = FakeRetriever()
    program = IRCoT(retriever, max_steps=3)
    sentences = [f"Fact number {i} is known." for i in range(1, 10)]
    pred, engine = run(program, reasoning(sentences))
    assert len(engine.calls) == 4 == call_bound("ircot", program.settings)
    assert retriever.asked == [Q, sentences[0], sentences[1]]
    last = pred.tree["nodes"][-2]
    assert last["action"] == "reject" and last["retrieved_by"] is None
    assert last["analysis"] == f"{sentences[2]} [max_steps reached: not searched]"
    assert pred.tree["stats"]["stop"] == "max_steps" and pred.answer == "Cincinnati"


def test_the_collection_is_capped_and_a_passage_found_again_is_not_added_twice():
    retriever = FakeRetriever(shared_id=True)  # every query finds "common" first
    program = IRCoT(retriever, k=5, max_passages=7, max_steps=3)
    pred, engine = run(program, reasoning([S1, S2, S3]))
    assert [len(c.inputs["passages"]) for c in engine.of("next_sentence")] == [5, 7, 7]
    nodes = pred.tree["nodes"]
    assert nodes[1]["ids"] == [f"{S1}|1", f"{S1}|2"]  # "common" was had; two of the four new fit
    assert nodes[2]["ids"] == []  # the collection is full
    assert len(pred.retrieved) == 7 and pred.retrieved[0].id == "common"
    assert pred.tree["stats"]["dropped"] == 2 + 4 and pred.tree["stats"]["passages"] == 7


def test_a_repeated_sentence_ends_the_chain_early():
    retriever = FakeRetriever()
    pred, engine = run(IRCoT(retriever), reasoning([S1, S1.upper(), S2]))
    assert engine.kinds() == ["next_sentence", "next_sentence", "answer"]
    assert retriever.asked == [Q, S1]
    assert pred.tree["stats"]["stop"] == "repeated"
    assert pred.tree["nodes"][2]["action"] == "reject" and "repeats step 1" in pred.tree["nodes"][2]["analysis"]


def test_a_failed_reasoning_call_is_recorded_and_the_reader_answers_from_what_was_collected():
    retriever = FakeRetriever()
    pred, engine = run(IRCoT(retriever), reasoning([S1, TimeoutError("slow"), S2]))
    assert engine.kinds() == ["next_sentence", "next_sentence", "answer"]
    assert [f["where"] for f in pred.failures] == ["reason@step2"]
    node = pred.tree["nodes"][2]
    assert node["action"] == "reject" and "slow" in node["failures"][0]["message"]
    assert len(engine.of("answer")[0].inputs["passages"]) == 10
    assert pred.answer == "Cincinnati" and pred.tree["stats"]["stop"] == "failed"


def test_a_failed_reader_falls_back_to_the_answer_the_reasoning_stated():
    pred, _ = run(IRCoT(FakeRetriever()), reasoning([S1, S3], answer=ConnectionError("down")))
    assert pred.answer == "Cincinnati" and pred.tree["stats"]["answer_from"] == "reasoning"
    assert [f["where"] for f in pred.failures] == ["answer"]
    assert pred.tree["nodes"][-1]["action"] == "reject" and pred.tree["nodes"][-1]["failures"]


def test_a_blank_or_garbage_reply_does_not_crash_the_program():
    pred, engine = run(IRCoT(FakeRetriever()), reasoning(["   "]))
    assert pred.tree["stats"]["stop"] == "empty" and engine.kinds()[-1] == "answer"
    pred, _ = run(IRCoT(FakeRetriever()), reasoning([Raw("%%% not the format at all")] * 8, answer="x"))
    assert [(f["where"], f["error"]) for f in pred.failures] == [("reason@step1", "AdapterParseError")]
    assert pred.tree["stats"]["stop"] == "failed" and pred.answer == "x"


def test_the_first_sentence_and_the_stated_answer():
    assert first_sentence("Dr. No was made by Terence Young. It came out in 1962.") == (
        "Dr. No was made by Terence Young.")
    assert first_sentence("\n  It was built in the U.S. in 1871.\nMore.") == "It was built in the U.S. in 1871."
    assert first_sentence("") == "" and len(first_sentence("word " * 500)) <= 400
    assert concluded_answer(S3) == "Cincinnati"
    assert concluded_answer("Thus, the answer is Steven Spielberg.") == "Steven Spielberg"
    assert concluded_answer(S2) is None


def test_annotated_demos_go_to_the_reader_only(train, tmp_path):
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call while building demos"))
    with dspy.context(lm=lm):
        compiled = AnnotatedFewShot(k=3, seed=0).compile(build_program("ircot", FakeRetriever()), trainset=hotpot)
    assert engine.calls == [] and compiled.reason.demos == []
    demos = compiled.answer.demos
    assert len(demos) == 3 and {d.answer for d in demos} == {"Vitznau", "1871", "Lake Lucerne"}
    assert all(set(d.keys()) == {"question", "passages", "answer"} and len(d.passages) == 2 for d in demos)
    compiled.save(str(tmp_path / "ircot.json"))
    fresh = IRCoT(FakeRetriever())
    fresh.load(str(tmp_path / "ircot.json"))
    assert fresh.dump_state() == compiled.dump_state()
