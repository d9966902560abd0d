"""Hop: a query and notes a hop, then the reader reads the notes; a repeated or missing query
ends the search early, and a failed call loses its own step, not the question."""

import json

import dspy
import pytest

from tests.fakes import FakeRetriever, run_scripted, scripted_lm
from treeqa.programs import build_program, call_bound
from treeqa.programs.hop import Hop
from treeqa.signatures.hop import clean_query
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot

Q = "Where was the director of Jaws born?"
N1 = "Jaws was directed by Steven Spielberg."
N2 = "Steven Spielberg was born in Cincinnati."


def script(queries, notes, answer="Cincinnati"):
    """The n-th query call writes queries[n] and the n-th notes call notes[n] (a list of notes,
    an exception, or raw text); the reader answers `answer`."""
    count = {"query": 0, "new_notes": 0}

    def respond(kind, inputs):
        if kind == "answer":
            return {"answer": answer}
        replies = queries if kind == "query" else notes
        reply = replies[count[kind]]
        count[kind] += 1
        if isinstance(reply, BaseException) or (kind == "new_notes" and isinstance(reply, str)):
            return reply
        return {kind: json.dumps(reply) if kind == "new_notes" else reply}
    return respond


def run(program, respond):
    return run_scripted(program, respond, Q)


def test_defaults_bound_and_bad_settings():
    program = Hop(FakeRetriever())
    assert (program.hops, program.k, program.max_notes) == (2, 5, 8)
    assert call_bound("hop") == 5 and call_bound("hop", {"hops": 3}) == 7
    assert [name for name, _ in program.named_predictors()] == ["generate_query", "append_notes", "answer"]
    with pytest.raises(ValueError, match="retriever"):
        Hop()
    with pytest.raises(ValueError, match="hops must be an integer >= 1"):
        Hop(FakeRetriever(), hops=0)
    with pytest.raises(ValueError, match="question is empty"):
        program(question="")


def test_the_trace_keeps_each_calls_notes_as_they_were_when_it_was_made():
    """DSPy's trace becomes the bootstrapped demos; the notes list grew after each call, and the
    compiled query demos showed the final notes as the first hop's input."""
    lm, _ = scripted_lm(script(["Jaws director", "Spielberg birthplace"], [[N1], [N2]]))
    with dspy.context(lm=lm, trace=[]):
        Hop(FakeRetriever())(question=Q)
        trace = list(dspy.settings.trace)
    notes = [call_inputs["notes"] for _, call_inputs, _ in trace if "notes" in call_inputs]
    assert notes == [[], [], [N1], [N1]]  # query@1, notes@1, query@2, notes@2


def test_two_hops_query_search_and_note_then_the_reader_reads_the_notes():
    retriever = FakeRetriever()
    pred, engine = run(Hop(retriever), script(["Jaws director", '"Steven Spielberg birthplace"'], [[N1], [N2]]))
    assert engine.kinds() == ["query", "new_notes", "query", "new_notes", "answer"]
    assert retriever.queries == [("Jaws director", 5), ("Steven Spielberg birthplace", 5)]  # quotes stripped
    queries, notes = engine.of("query"), engine.of("new_notes")
    assert [c.inputs["notes"] for c in queries] == [[], [N1]]
    assert [c.inputs["notes"] for c in notes] == [[], [N1]]
    assert notes[1].inputs["passages"] == [f"Steven Spielberg birthplace title {i}: text {i} about "
                                           f"Steven Spielberg birthplace" for i in range(5)]
    assert engine.of("answer")[0].inputs["passages"] == [N1, N2]
    assert pred.answer == "Cincinnati" and pred.notes == [N1, N2] and pred.failures == []
    assert pred.queries == ["Jaws director", "Steven Spielberg birthplace"]
    assert [p.id for p in pred.retrieved] == [f"{q}|{i}" for q in pred.queries for i in range(5)]
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "search", "accept"]
    assert [n["retrieved_by"] for n in nodes] == ["Jaws director", "Steven Spielberg birthplace", None]
    assert [n["analysis"] for n in nodes] == [N1, N2, "answer: Cincinnati"]
    assert nodes[0]["titles"] == [f"Jaws director title {i}" for i in range(5)]
    stats = pred.tree["stats"]
    assert (stats["stop"], stats["retrievals"], stats["notes"], stats["read"]) == ("hops", 2, 2, "notes")
    assert pred.stats == stats


def test_every_hop_runs_to_the_bound():
    program = Hop(FakeRetriever(), hops=3)
    pred, engine = run(program, script(["a", "b", "c"], [[N1], [], [N2]]))
    assert len(engine.calls) == 7 == call_bound("hop", program.settings)
    assert pred.tree["nodes"][1]["analysis"] == "(no new notes)" and pred.tree["stats"]["stop"] == "hops"


def test_a_repeated_query_ends_the_search_early():
    retriever = FakeRetriever()
    pred, engine = run(Hop(retriever, hops=3), script(["Jaws director", "JAWS DIRECTOR"], [[N1]]))
    assert engine.kinds() == ["query", "new_notes", "query", "answer"]
    assert retriever.asked == ["Jaws director"]
    node = pred.tree["nodes"][1]
    assert node["action"] == "reject" and node["ids"] == [] and "repeats an earlier query" in node["analysis"]
    assert pred.tree["stats"]["stop"] == "repeated"


def test_a_failed_query_falls_back_to_the_question_once_then_ends_the_search():
    retriever = FakeRetriever()
    pred, engine = run(Hop(retriever), script([TimeoutError("slow"), "  "], [[N1]]))
    assert retriever.asked == [Q] and engine.kinds() == ["query", "new_notes", "query", "answer"]
    assert [f["where"] for f in pred.failures] == ["query@hop1"]
    first, second = pred.tree["nodes"][:2]
    assert first["action"] == "search" and first["analysis"].endswith("[no query written: searched the question]")
    assert first["failures"][0]["where"] == "query@hop1"
    assert second["action"] == "reject" and pred.tree["stats"]["stop"] == "no_query"
    assert pred.notes == [N1]


def test_failed_notes_lose_their_hop_only_and_without_notes_the_reader_reads_the_passages():
    garbage = "not a list ["  # sent raw: DSPy's chat parse fails, then its JSON retry does too
    pred, engine = run(Hop(FakeRetriever(), k=3), script(["q1", "q2"], [ConnectionError("down"), garbage, garbage]))
    assert engine.kinds() == ["query", "new_notes", "query", "new_notes", "new_notes", "answer"]  # hop 2 still ran
    assert [(f["where"], f["error"]) for f in pred.failures] == [("notes@hop1", "LMUnexpectedError"),
                                                                 ("notes@hop2", "AdapterParseError")]
    assert [n["action"] for n in pred.tree["nodes"]] == ["reject", "reject", "accept"]
    assert pred.tree["nodes"][0]["ids"] == ["q1|0", "q1|1", "q1|2"]  # the search happened, its notes failed
    assert engine.of("answer")[0].inputs["passages"] == [f"q1 title {i}: text {i} about q1" for i in range(3)]
    assert pred.tree["stats"]["read"] == "passages" and pred.answer == "Cincinnati"
    assert len(pred.retrieved) == 6


def test_notes_are_deduplicated_cut_and_capped():
    long = "word " * 200
    program = Hop(FakeRetriever(), max_notes=3, note_chars=50)
    pred, _ = run(program, script(["a", "b"], [[N1, " ", N1.upper(), long], [N2, "Another fact.", "One more."]]))
    assert pred.notes == [N1, long.strip()[:50].strip(), N2]
    assert pred.tree["stats"]["dropped_notes"] == 2


def test_clean_query():
    assert clean_query('Query: "Jaws director"\nmore text') == "Jaws director"
    assert clean_query("   \n ") == "" and clean_query(None) == ""
    assert len(clean_query("x" * 1000)) == 300


def test_annotated_demos_go_to_the_reader_only(train, tmp_path):
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call while building demos"))
    with dspy.context(lm=lm):
        compiled = AnnotatedFewShot(k=3, seed=0).compile(build_program("hop", FakeRetriever()), trainset=hotpot)
    assert engine.calls == [] and compiled.generate_query.demos == [] and compiled.append_notes.demos == []
    demos = compiled.answer.demos
    assert len(demos) == 3 and {d.answer for d in demos} == {"Vitznau", "1871", "Lake Lucerne"}
    assert all(set(d.keys()) == {"question", "passages", "answer"} for d in demos)
    compiled.save(str(tmp_path / "hop.json"))
    fresh = Hop(FakeRetriever())
    fresh.load(str(tmp_path / "hop.json"))
    assert fresh.dump_state() == compiled.dump_state()
