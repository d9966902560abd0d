"""Self-Ask: each follow-up the model asks is searched and answered from its passages before the
next is asked; "no more needed", the bound, a repeat, a blank or failed reply end the chain; the
final answer is written from the follow-ups and their answers."""

import dspy
import pytest

from tests.fakes import FakeRetriever, Raw, run_scripted, scripted_lm
from treeqa.programs import build_program, call_bound
from treeqa.programs.common import repeat_of
from treeqa.programs.self_ask import SelfAsk
from treeqa.signatures.formatting import format_history
from treeqa.signatures.self_ask import clean_follow_up
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot

Q = "Where was the director of Jaws born?"
F1 = "Who directed Jaws?"
F2 = "Where was Steven Spielberg born?"
DONE = object()  # in a script: "no follow-up needed"


def asking(follow_ups, intermediate=("Steven Spielberg", "Cincinnati"), final="Cincinnati"):
    """A script: the n-th follow-up call asks follow_ups[n] (a question, DONE, an exception or `Raw`
    text; DONE once they run out), the n-th intermediate answer is intermediate[n] (an answer or an
    exception), and the final answer is `final` (an answer or an exception)."""
    def respond(kind, inputs):
        if kind == "follow_up_needed":
            reply = follow_ups[respond.asked] if respond.asked < len(follow_ups) else DONE
            respond.asked += 1
            if reply is DONE:
                return {"follow_up_needed": False, "follow_up": ""}
            return {"follow_up_needed": True, "follow_up": reply} if type(reply) is str else reply
        assert kind == "answer", kind
        if "passages" in inputs:  # an intermediate answer
            reply = intermediate[respond.read % len(intermediate)]
            respond.read += 1
        else:
            reply = final
        return reply if isinstance(reply, (BaseException, Raw)) else {"answer": reply}
    respond.asked = respond.read = 0
    return respond


def run(program, respond):
    return run_scripted(program, respond, Q)


def test_defaults_bound_and_bad_settings():
    program = SelfAsk(FakeRetriever())
    assert (program.k, program.max_follow_ups, program.passage_chars) == (5, 4, 1000)
    assert call_bound("selfask") == 9 and call_bound("selfask", {"max_follow_ups": 2}) == 5
    assert [name for name, _ in program.named_predictors()] == ["follow_up", "intermediate", "answer"]
    with pytest.raises(ValueError, match="retriever"):
        SelfAsk()
    with pytest.raises(ValueError, match="max_follow_ups must be an integer >= 1"):
        SelfAsk(FakeRetriever(), max_follow_ups=0)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        SelfAsk(FakeRetriever(), k=True)
    with pytest.raises(ValueError, match="question is empty"):
        program(question="  ")


def test_each_follow_up_is_searched_and_answered_before_the_next_is_asked():
    retriever = FakeRetriever()
    pred, engine = run(SelfAsk(retriever), asking([F1, F2]))
    assert engine.kinds() == ["follow_up_needed", "answer"] * 3
    assert retriever.queries == [(F1, 5), (F2, 5)]  # only follow-ups are searched, never the question
    asks = engine.of("follow_up_needed")
    assert [c.inputs["history"] for c in asks] == [
        format_history([]), format_history([(F1, "Steven Spielberg")]),
        format_history([(F1, "Steven Spielberg"), (F2, "Cincinnati")])]
    assert all(c.inputs["question"] == Q for c in asks)
    first, second, final = engine.of("answer")
    assert first.inputs["question"] == F1 and len(first.inputs["passages"]) == 5  # the follow-up's own passages
    assert first.inputs["passages"][0] == f"{F1} title 0: text 0 about {F1}"
    assert second.inputs["question"] == F2 and second.inputs["passages"][0].startswith(F2)
    assert final.inputs == {"question": Q, "history": asks[2].inputs["history"]}
    assert pred.answer == "Cincinnati" and pred.failures == []
    assert pred.follow_ups == [{"follow_up": F1, "answer": "Steven Spielberg"},
                               {"follow_up": F2, "answer": "Cincinnati"}]
    assert [p.id for p in pred.retrieved] == [f"{q}|{i}" for q in (F1, F2) for i in range(5)]
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "search", "accept"]
    assert [n["retrieved_by"] for n in nodes] == [F1, F2, None]
    assert [n["parent"] for n in nodes] == [None, 0, 1]
    assert nodes[0]["titles"] == [f"{F1} title {i}" for i in range(5)]
    assert nodes[0]["analysis"] == "intermediate answer: Steven Spielberg"
    assert nodes[2]["analysis"] == "answer: Cincinnati" and nodes[2]["ids"] == []
    assert pred.tree["stats"] == {"steps": 3, "stop": "enough", "retrievals": 2, "answer_from": "final"}
    assert pred.stats == pred.tree["stats"]


def test_no_follow_up_needed_answers_at_once_without_searching():
    retriever = FakeRetriever()
    pred, engine = run(SelfAsk(retriever), asking([DONE], final="Paris"))
    assert engine.kinds() == ["follow_up_needed", "answer"] and retriever.queries == []
    assert engine.of("answer")[0].inputs["history"] == format_history([])
    assert pred.answer == "Paris" and pred.retrieved == [] and pred.tree["stats"]["stop"] == "enough"
    assert [n["action"] for n in pred.tree["nodes"]] == ["accept"]


def test_the_bound_stops_asking_and_the_final_answer_reads_every_pair():
    retriever = FakeRetriever()
    program = SelfAsk(retriever, max_follow_ups=3, k=2)
    questions = [f"Which fact number {i} holds?" for i in range(1, 10)]
    pred, engine = run(program, asking(questions))
    assert len(engine.calls) == 7 == call_bound("selfask", program.settings)
    assert retriever.queries == [(q, 2) for q in questions[:3]]
    assert engine.kinds()[-1] == "answer" and "[3] Query: " + questions[2] in engine.calls[-1].inputs["history"]
    assert pred.tree["stats"]["stop"] == "max_follow_ups" and pred.tree["stats"]["retrievals"] == 3
    assert [n["action"] for n in pred.tree["nodes"]] == ["search"] * 3 + ["accept"]


def test_a_repeated_follow_up_ends_the_chain_early():
    retriever = FakeRetriever()
    pred, engine = run(SelfAsk(retriever), asking([F1, "  who directed JAWS "]))
    assert engine.kinds() == ["follow_up_needed", "answer", "follow_up_needed", "answer"]
    assert retriever.asked == [F1]
    node = pred.tree["nodes"][1]
    assert node["action"] == "reject" and node["retrieved_by"] is None and "repeats follow-up 1" in node["analysis"]
    assert pred.tree["stats"]["stop"] == "repeated" and pred.answer == "Cincinnati"


def test_a_failed_intermediate_answer_is_recorded_and_the_chain_goes_on():
    retriever = FakeRetriever()
    pred, engine = run(SelfAsk(retriever), asking([F1, F2], intermediate=[TimeoutError("slow"), "Cincinnati"]))
    assert engine.kinds() == ["follow_up_needed", "answer"] * 3
    assert [f["where"] for f in pred.failures] == ["intermediate@step1"]
    assert engine.of("follow_up_needed")[1].inputs["history"] == format_history([(F1, "")])  # "(no evidence)"
    node = pred.tree["nodes"][0]
    assert node["action"] == "reject" and node["retrieved_by"] == F1 and len(node["ids"]) == 5
    assert "slow" in node["failures"][0]["message"]
    assert pred.follow_ups[0] == {"follow_up": F1, "answer": ""}
    assert retriever.asked == [F1, F2] and pred.answer == "Cincinnati"


def test_a_failed_follow_up_call_stops_and_the_question_is_still_answered():
    retriever = FakeRetriever()
    pred, engine = run(SelfAsk(retriever), asking([F1, ConnectionError("down")]))
    assert engine.kinds() == ["follow_up_needed", "answer", "follow_up_needed", "answer"]
    assert [f["where"] for f in pred.failures] == ["follow_up@step2"]
    assert engine.calls[-1].inputs["question"] == Q
    assert engine.calls[-1].inputs["history"] == format_history([(F1, "Steven Spielberg")])
    node = pred.tree["nodes"][1]
    assert node["action"] == "reject" and node["failures"][0]["where"] == "follow_up@step2"
    assert pred.tree["stats"]["stop"] == "failed" and pred.answer == "Cincinnati"
    assert [p.id for p in pred.retrieved] == [f"{F1}|{i}" for i in range(5)]


def test_a_failed_final_answer_falls_back_to_the_last_intermediate_answer():
    pred, _ = run(SelfAsk(FakeRetriever()), asking([F1, F2], final=ConnectionError("down")))
    assert pred.answer == "Cincinnati" and pred.tree["stats"]["answer_from"] == "last_follow_up"
    assert [f["where"] for f in pred.failures] == ["answer"]
    assert pred.tree["nodes"][-1]["action"] == "reject" and pred.tree["nodes"][-1]["failures"]
    pred, _ = run(SelfAsk(FakeRetriever()), asking([DONE], final=ConnectionError("down")))
    assert pred.answer == "" and pred.tree["stats"]["answer_from"] == "none"


def test_a_blank_or_garbage_reply_does_not_crash_the_program():
    pred, engine = run(SelfAsk(FakeRetriever()), asking(["   "]))
    assert pred.tree["stats"]["stop"] == "no_follow_up" and engine.kinds() == ["follow_up_needed", "answer"]
    assert pred.tree["nodes"][0]["action"] == "reject"
    pred, engine = run(SelfAsk(FakeRetriever()), asking([Raw("%%% not the format at all")], final="x"))
    assert [(f["where"], f["error"]) for f in pred.failures] == [("follow_up@step1", "AdapterParseError")]
    assert pred.tree["stats"]["stop"] == "failed" and pred.answer == "x"
    pred, _ = run(SelfAsk(FakeRetriever()), asking([F1], intermediate=[Raw("%%%")], final="  "))
    assert pred.answer == "" and [f["where"] for f in pred.failures] == ["intermediate@step1"]


def test_follow_ups_are_cleaned_and_compared():
    assert clean_follow_up('Follow up: "Who directed Jaws?"\nIntermediate answer: x') == F1
    assert clean_follow_up("follow-up question 2 - Who directed Jaws?") == F1
    assert clean_follow_up("  \n ") == "" and len(clean_follow_up("word " * 500)) <= 300
    # a repeat is the same words, whatever the case, spacing and punctuation (the one notion Self-Ask,
    # IRCoT, Hop and ReAct stop or ask again on); the position counts from 1
    assert repeat_of(" who  directed jaws ", [F2, F1]) == 2 and repeat_of("Who directed, Jaws!", [F1]) == 1
    assert repeat_of(F1, [F2]) is None and repeat_of(F1, []) is None and repeat_of("Who directed Jaws 2?", [F1]) is None


def test_annotated_demos_go_to_the_intermediate_reader_only(train, tmp_path):
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call while building demos"))
    with dspy.context(lm=lm):
        compiled = AnnotatedFewShot(k=3, seed=0).compile(build_program("selfask", FakeRetriever()), trainset=hotpot)
    assert engine.calls == [] and compiled.follow_up.demos == [] and compiled.answer.demos == []
    demos = compiled.intermediate.demos
    assert len(demos) == 3 and {d.answer for d in demos} == {"Vitznau", "1871", "Lake Lucerne"}
    assert all(set(d.keys()) == {"question", "passages", "answer"} and len(d.passages) == 2 for d in demos)
    compiled.save(str(tmp_path / "selfask.json"))
    fresh = SelfAsk(FakeRetriever())
    fresh.load(str(tmp_path / "selfask.json"))
    assert fresh.dump_state() == compiled.dump_state()
