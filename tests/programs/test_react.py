"""ReActSearch: dspy.ReAct with a corpus search tool; its steps, bound, failures and tree."""

import json

import dspy
import pytest
from dspy import lm15

from tests.fakes import FakeRetriever, Raw, passage, run_scripted
from treeqa.programs import build_program, call_bound
from treeqa.programs.react import AgentStep, ReActSearch
from treeqa.signatures.react import SearchThenAnswer

Q = "Which city is the birthplace of the director of Jaws?"


def act(tool: str, query: str | None = None, thought: str | None = None) -> dict:
    """One agent step's reply."""
    args = "{}" if query is None else f'{{"query": "{query}"}}'
    return {"next_thought": thought or f"Next: {tool} {query or ''}".strip(), "next_tool_name": tool,
            "next_tool_args": args}


def agent(steps: list, answer="Cincinnati", reasoning: str = "The passages say so.", retry=None):
    """A script: the n-th agent step (counted from the trajectory it is shown) gets `steps[n]` (a
    reply dict, raw text or an exception); the extract call answers `answer` (or raises it, or
    replies with it where it is `Raw` text), the answer-only retry `retry`. Every call's inputs
    are kept in `seen` (the trajectory's fields are parsed into them)."""
    seen = []

    def respond(kind, inputs):
        if kind == "next_thought":
            seen.append(inputs)
            n = sum(key.startswith("thought_") for key in inputs)
            return steps[n] if n < len(steps) else act("finish")
        seen.append(inputs)
        if kind == "answer":
            assert retry is not None, "an answer-only retry nobody expected"
            return retry if isinstance(retry, (BaseException, Raw)) else {"answer": retry}
        assert kind == "reasoning", kind
        if isinstance(answer, Raw):
            return answer
        return answer if isinstance(answer, BaseException) else {"reasoning": reasoning, "answer": answer}

    return respond, seen


def run(program, respond):
    return run_scripted(program, respond, Q)


class FailingRetriever(FakeRetriever):
    """Fails for the queries in `broken`, searches like FakeRetriever otherwise."""

    def __init__(self, broken):
        super().__init__()
        self.broken = set(broken)

    def search_batch(self, queries, k):
        if any(q in self.broken for q in queries):
            self.queries.extend((q, k) for q in queries)
            raise ConnectionError("index server unreachable")
        return super().search_batch(queries, k)


def test_a_two_hop_search_then_finish():
    retriever = FakeRetriever()
    respond, seen = agent([act("search", "Jaws director", "Find who directed Jaws."),
                           act("search", "Steven Spielberg birthplace", "Now where Spielberg was born."),
                           act("finish", thought="Spielberg was born in Cincinnati.")],
                          answer="The answer is Cincinnati.")
    pred, engine = run(ReActSearch(retriever), respond)
    assert engine.kinds() == ["next_thought"] * 3 + ["reasoning"]
    assert retriever.queries == [("Jaws director", 3), ("Steven Spielberg birthplace", 3)]
    assert pred.answer == "Cincinnati" and pred.failures == []
    # each search's passages come back to the agent as its observation, numbered and titled
    assert seen[1]["observation_0"].split("\n\n") == [f"[{i + 1}] Jaws director title {i}: text {i} about Jaws director"
                                                      for i in range(3)]
    assert seen[3]["observation_1"].startswith("[1] Steven Spielberg birthplace title 0:")  # the extract reads it all
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "search", "accept"]
    assert [n["parent"] for n in nodes] == [None, 0, 1]
    assert [n["retrieved_by"] for n in nodes] == ["Jaws director", "Steven Spielberg birthplace", None]
    assert nodes[0]["ids"] == [f"Jaws director|{i}" for i in range(3)]
    assert nodes[1]["titles"] == [f"Steven Spielberg birthplace title {i}" for i in range(3)]
    assert [n["analysis"] for n in nodes] == ["Find who directed Jaws.", "Now where Spielberg was born.",
                                              "The passages say so."]
    assert [p.id for p in pred.retrieved] == nodes[0]["ids"] + nodes[1]["ids"]
    assert pred.tree["stats"] == pred.stats
    assert pred.stats == {"steps": 3, "stop": "finish", "iterations": 3, "searches": 2, "failures": 0,
                           "distinct_retrieved": 6, "args_unwrapped": 0, "repeats": 0}
    assert pred.trajectory["tool_args_1"] == {"query": "Steven Spielberg birthplace"}


def test_the_search_stops_at_max_iters_and_answers_from_what_it_found():
    retriever = FakeRetriever()
    respond, _ = agent([act("search", f"query {i}") for i in range(10)])
    program = ReActSearch(retriever, max_iters=2)
    pred, engine = run(program, respond)
    assert engine.kinds() == ["next_thought", "next_thought", "reasoning"]
    assert len(engine.calls) == call_bound("react", {"max_iters": 2}) - 1  # no retry needed
    assert retriever.asked == ["query 0", "query 1"]
    assert [n["action"] for n in pred.tree["nodes"]] == ["search", "search", "accept"]
    assert pred.stats["stop"] == "max_iters" and pred.answer == "Cincinnati"


def test_a_repeated_query_is_not_searched_again_and_the_agent_is_asked_for_a_new_one():
    """Without the guard the embedded model copied its first query into every later step."""
    retriever = FakeRetriever()
    respond, seen = agent([act("search", "Jaws director", "Find who directed Jaws."),
                           act("search", "jaws  Director!", "Search again."),
                           act("search", "Steven Spielberg birthplace"), act("finish")])
    pred, engine = run(ReActSearch(retriever), respond)
    assert engine.kinds() == ["next_thought"] * 4 + ["reasoning"]
    assert retriever.asked == ["Jaws director", "Steven Spielberg birthplace"]  # case and punctuation aside
    assert seen[2]["observation_1"].startswith("You made this search before: its passages are in observation_0")
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "reject", "search", "accept"]
    assert nodes[1]["retrieved_by"] == "jaws Director!" and nodes[1]["ids"] == []
    assert nodes[1]["analysis"].startswith("Search again. [searched at step 1: not searched again")
    assert pred.failures == [] and pred.stats["stop"] == "finish"
    assert (pred.stats["searches"], pred.stats["repeats"]) == (2, 1)


def test_a_second_repeated_query_ends_the_search():
    retriever = FakeRetriever()
    respond, seen = agent([act("search", "Jaws director"), act("search", "Jaws director"),
                           act("search", "Spielberg birthplace"), act("search", "Spielberg birthplace"),
                           act("search", "never asked")])
    pred, engine = run(ReActSearch(retriever, max_iters=6), respond)
    # the fourth step repeats after the request for a new query: dspy.ReAct is told to finish there
    assert engine.kinds() == ["next_thought"] * 4 + ["reasoning"]
    assert retriever.asked == ["Jaws director", "Spielberg birthplace"]
    assert pred.trajectory["tool_name_3"] == "finish" and pred.trajectory["tool_args_3"] == {}
    assert "observation_3" in seen[-1]  # the extract reads the whole trajectory
    nodes = pred.tree["nodes"]
    assert [n["action"] for n in nodes] == ["search", "reject", "search", "reject", "accept"]
    assert nodes[3]["retrieved_by"] == "Spielberg birthplace"
    assert nodes[3]["analysis"].endswith("a new one asked for: the search ended here]")
    assert pred.stats["stop"] == "repeated_query" and pred.stats["repeats"] == 2
    assert pred.failures == [] and pred.answer == "Cincinnati"


def test_the_arguments_own_description_is_not_a_query():
    """The embedded model copied the schema whole on 2 of the first 12 reference questions and
    searched with the description, which found unrelated passages."""
    from treeqa.programs.react import SEARCH_TOOL_ARGS

    retriever = FakeRetriever()
    copied = {"next_thought": "Search.", "next_tool_name": "search",
              "next_tool_args": json.dumps({"query": {"type": "string", "description": SEARCH_TOOL_ARGS["query"]}})}
    filled = act("search", "a few words to search for, such as Jaws director")  # a real query, searched
    respond, seen = agent([copied, filled])
    pred, _ = run(ReActSearch(retriever), respond)
    assert retriever.asked == ["a few words to search for, such as Jaws director"]
    assert seen[1]["observation_0"].startswith("That is the description of the query argument, not a query.")
    assert [(f["where"], f["error"]) for f in pred.failures] == [("search@step1", "DescriptionAsQuery")]
    assert [n["action"] for n in pred.tree["nodes"]] == ["reject", "search", "accept"]


def test_a_query_whose_search_failed_may_be_searched_again():
    retriever = FailingRetriever(broken={"Jaws director"})
    respond, seen = agent([act("search", "Jaws director"), act("search", "Jaws director")])
    pred, _ = run(ReActSearch(retriever), respond)
    assert retriever.asked == ["Jaws director", "Jaws director"]
    assert seen[2]["observation_1"].startswith("The search failed") and pred.stats["repeats"] == 0


def test_a_query_written_inside_the_arguments_schema_is_taken_out_and_searched():
    """The embedded model answered every step of the first reference questions with the search
    argument's schema around its query; the tool refused each and ReAct never searched."""
    retriever = FakeRetriever()
    echo = {"next_thought": "Find who directed Jaws.", "next_tool_name": "search",
            "next_tool_args": '{"query": {"type": "string", "description": "Jaws director"}}'}
    other = {**echo, "next_tool_args": '{"query": {"value": "Spielberg birthplace", "type": "string"}}'}
    odd = {**echo, "next_tool_args": '{"query": {"type": "string", "text": "Spielberg"}}'}  # not the schema's shape
    respond, seen = agent([echo, other, odd])
    pred, engine = run(ReActSearch(retriever), respond)
    assert retriever.asked == ["Jaws director", "Spielberg birthplace"]
    assert seen[1]["observation_0"].startswith("[1] Jaws director title 0:")
    assert pred.trajectory["tool_args_0"] == {"query": "Jaws director"}
    assert [n["action"] for n in pred.tree["nodes"]] == ["search", "search", "reject", "accept"]
    assert [f["error"] for f in pred.failures] == ["BadToolArguments"]
    assert pred.stats["args_unwrapped"] == 2


def test_finish_at_once_searches_nothing():
    retriever = FakeRetriever()
    respond, _ = agent([act("finish", thought="I know this one.")], answer="Cincinnati")
    pred, engine = run(ReActSearch(retriever), respond)
    assert engine.kinds() == ["next_thought", "reasoning"] and retriever.queries == []
    assert pred.retrieved == [] and pred.stats["stop"] == "finish"
    assert [n["action"] for n in pred.tree["nodes"]] == ["accept"]


def test_a_failed_search_is_the_agents_observation_and_is_recorded():
    retriever = FailingRetriever(broken={"Jaws director"})
    respond, seen = agent([act("search", "Jaws director"), act("search", "Jaws film")])
    pred, engine = run(ReActSearch(retriever), respond)
    assert engine.kinds() == ["next_thought"] * 3 + ["reasoning"]
    assert retriever.asked == ["Jaws director", "Jaws film"]
    assert seen[1]["observation_0"].startswith("The search failed (ConnectionError)")
    assert [(f["where"], f["error"]) for f in pred.failures] == [("search@step1", "ConnectionError")]
    first, second, last = pred.tree["nodes"]
    assert first["action"] == "reject" and first["retrieved_by"] == "Jaws director" and first["ids"] == []
    assert first["failures"] == pred.failures
    assert second["action"] == "search" and last["action"] == "accept"
    assert [p.id for p in pred.retrieved] == [f"Jaws film|{i}" for i in range(3)]
    assert pred.answer == "Cincinnati"


def test_a_failed_step_call_ends_the_search_and_the_question_is_still_answered():
    respond, seen = agent([act("search", "Jaws director"), RuntimeError("server went away")])
    pred, engine = run(ReActSearch(FakeRetriever()), respond)
    assert engine.kinds() == ["next_thought", "next_thought", "reasoning"]
    assert [f["where"] for f in pred.failures] == ["step2"]
    assert [n["action"] for n in pred.tree["nodes"]] == ["search", "reject", "accept"]
    assert pred.tree["nodes"][1]["failures"] == pred.failures
    assert pred.stats["stop"] == "step_failed" and pred.answer == "Cincinnati"
    assert "observation_0" in seen[-1]  # the extract read the search made before the failure
    assert [p.id for p in pred.retrieved] == [f"Jaws director|{i}" for i in range(3)]


def test_a_garbage_step_reply_is_recorded_not_fatal():
    respond, _ = agent(["I am not sure what to do ¯\\_(ツ)_/¯"])
    pred, engine = run(ReActSearch(FakeRetriever()), respond)
    # DSPy's chat adapter retries the reply as JSON once, then the step counts as failed
    assert engine.kinds() == ["next_thought", "next_thought", "reasoning"]
    assert [(f["where"], f["error"]) for f in pred.failures] == [("step1", "AdapterParseError")]
    assert pred.answer == "Cincinnati" and pred.retrieved == []


def test_a_failed_answer_call_is_answered_again_from_the_passages_found():
    # a reasoning cut off at its token budget leaves JSON that does not parse (the embedded
    # model's adapter: one call per failure, no retry in another format)
    cut = Raw('{"reasoning": "Jaws was directed by Steven Spielberg, who was born in')
    steps = [Raw(json.dumps({"next_thought": f"Search {q}.", "next_tool_name": "search",
                             "next_tool_args": {"query": q}})) for q in ("Jaws director", "Spielberg birthplace")]
    steps.append(Raw(json.dumps({"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}})))
    respond, seen = agent(steps, answer=cut, retry=Raw('{"answer": "Cincinnati"}'))
    with dspy.context(adapter=dspy.JSONAdapter()):
        pred, engine = run(ReActSearch(FakeRetriever()), respond)
    assert engine.kinds() == ["next_thought"] * 3 + ["reasoning", "answer"]
    assert len(engine.calls) <= call_bound("react")
    # the retry reads every passage the searches found, cut like the observations
    assert [p.split(":")[0] for p in seen[-1]["passages"]] == [
        f"{q} title {i}" for q in ("Jaws director", "Spielberg birthplace") for i in range(3)]
    assert pred.answer == "Cincinnati"
    assert [(f["where"], f["error"]) for f in pred.failures] == [("answer", "AdapterParseError")]
    last = pred.tree["nodes"][-1]
    assert last["action"] == "accept" and last["analysis"].startswith("[the answer call failed")
    assert last["failures"] == pred.failures and pred.trajectory == {}


def test_a_failed_answer_call_whose_retry_fails_too_keeps_the_search():
    respond, _ = agent([act("search", "Jaws director")], answer=TimeoutError("no reply in 60 s"),
                       retry=TimeoutError("no reply again"))
    pred, engine = run(ReActSearch(FakeRetriever()), respond)
    assert engine.kinds() == ["next_thought", "next_thought", "reasoning", "answer"]
    assert pred.answer == "" and [f["where"] for f in pred.failures] == ["answer", "answer_only"]
    assert [n["action"] for n in pred.tree["nodes"]] == ["search", "reject"]
    assert pred.tree["nodes"][-1]["failures"] == pred.failures
    assert len(pred.retrieved) == 3 and pred.trajectory == {}


def test_an_empty_answer_is_not_accepted():
    respond, _ = agent([act("finish")], answer="  ")
    pred, _ = run(ReActSearch(FakeRetriever()), respond)
    assert pred.answer == "" and pred.tree["nodes"][-1]["action"] == "reject"


def test_bad_tool_arguments_and_an_empty_query_are_rejected_steps():
    retriever = FakeRetriever()
    bad_args = {"next_thought": "Search.", "next_tool_name": "search", "next_tool_args": '{"q": "Jaws"}'}
    respond, seen = agent([bad_args, act("search", "   "), act("search", "Jaws director")])
    pred, _ = run(ReActSearch(retriever), respond)
    assert retriever.asked == ["Jaws director"]  # neither bad step reached the index
    assert seen[1]["observation_0"].startswith("Execution error in search")  # DSPy's tool refused the args
    assert seen[2]["observation_1"].startswith("The query was empty")
    assert [n["action"] for n in pred.tree["nodes"]] == ["reject", "reject", "search", "accept"]
    assert sorted((f["where"], f["error"]) for f in pred.failures) == [("search@step1", "BadToolArguments"),
                                                                      ("search@step2", "EmptyQuery")]
    assert pred.answer == "Cincinnati"


def test_a_context_window_refusal_drops_the_oldest_step_and_asks_again():
    replies = [act("search", "query 1"), act("search", "query 2"), lm15.ContextLengthError("prompt too long"),
               act("finish")]

    def respond(kind, inputs):
        return replies.pop(0) if kind == "next_thought" else {"reasoning": "r", "answer": "Cincinnati"}

    pred, engine = run(ReActSearch(FakeRetriever()), respond)
    # steps 1 and 2 search; step 3 is refused, ReAct drops step 1 from the trajectory and asks again
    assert engine.kinds() == ["next_thought"] * 4 + ["reasoning"]
    refused, retry, extract = engine.calls[2:]
    assert "observation_0" in refused.inputs and "observation_0" not in retry.inputs
    assert "observation_1" in retry.inputs and "observation_0" not in extract.inputs
    assert [(f["where"], f["error"]) for f in pred.failures] == [("step3", "ContextWindowExceededError")]
    # the refused request completed nothing: the completed calls stay within the bound
    assert len(engine.calls) - 1 <= call_bound("react", {"max_iters": 4})
    assert [n["action"] for n in pred.tree["nodes"]] == ["search", "search", "accept"]  # the tree keeps both
    assert pred.stats["stop"] == "finish" and pred.answer == "Cincinnati"


def test_when_the_trajectory_cannot_be_shortened_the_search_stops():
    def respond(kind, inputs):
        if kind == "next_thought":
            return act("search", "Jaws") if "observation_0" not in inputs else lm15.ContextLengthError("too long")
        return {"reasoning": "r", "answer": "Cincinnati"}

    pred, engine = run(ReActSearch(FakeRetriever()), respond)
    assert engine.kinds() == ["next_thought", "next_thought", "reasoning"]
    assert pred.stats["stop"] == "context_window" and pred.answer == "Cincinnati"


def test_a_bug_in_our_retriever_code_is_not_swallowed_by_the_agent(monkeypatch):
    import treeqa.programs.react as react

    retriever = FakeRetriever()
    monkeypatch.setattr(react, "format_passages", lambda passages, chars: passages.missing)  # our own code breaks
    respond, _ = agent([act("search", "Jaws director")])
    with pytest.raises(AttributeError):
        run(ReActSearch(retriever), respond)


def test_settings_are_checked_and_the_predictors_are_dspy_react_s():
    with pytest.raises(ValueError, match="needs a retriever"):
        ReActSearch(None)
    for bad in ({"max_iters": 0}, {"k": 0}, {"passage_chars": 10}, {"max_iters": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ReActSearch(FakeRetriever(), **bad)
    program = build_program("react", FakeRetriever(), max_iters=6, k=5)
    assert (program.max_iters, program.k, program.passage_chars) == (6, 5, 500)
    assert isinstance(program.agent, dspy.ReAct) and program.agent.max_iters == 6
    assert set(program.agent.tools) == {"search", "finish"}
    predictors = dict(program.named_predictors())
    assert set(predictors) == {"agent.react", "agent.extract.predict", "answer_only"}
    assert isinstance(predictors["agent.react"], AgentStep)
    assert predictors[ReActSearch.reader] is program.agent.extract.predict
    assert predictors["agent.react"].config["max_tokens"] == SearchThenAnswer.step_max_tokens
    assert predictors[ReActSearch.reader].config["max_tokens"] > SearchThenAnswer.max_tokens
    assert ReActSearch.call_bound(program.settings) == 8
    assert SearchThenAnswer.instructions in predictors["agent.react"].signature.instructions


def test_a_copy_searches_with_its_own_run_and_shares_the_retriever():
    retriever = FakeRetriever()
    program = ReActSearch(retriever, k=2)
    copy = program.deepcopy()
    assert copy.retriever is retriever
    respond, _ = agent([act("search", "Jaws director")])
    pred, _ = run(copy, respond)
    assert retriever.queries == [("Jaws director", 2)] and len(pred.retrieved) == 2


def test_fixed_passages_are_cut_to_passage_chars():
    long = passage("Jaws", "x" * 2000)
    respond, seen = agent([act("search", "Jaws")])
    run(ReActSearch(FakeRetriever(fixed={"Jaws": [long]}), passage_chars=100), respond)
    assert seen[1]["observation_0"] == "[1] Jaws: " + "x" * 100 + " …"


def test_a_failed_step_is_logged_in_one_line_not_with_dspys_traceback(caplog):
    """A failing or garbage-answering server: one warning line per failed step (treeqa's), not
    DSPy's "Ending the trajectory" with five frames of traceback besides."""
    respond, _ = agent([act("search", "Jaws director"), RuntimeError("HTTP 500 from the server")])
    with caplog.at_level("WARNING"):
        pred, _ = run(ReActSearch(FakeRetriever()), respond)
    assert [f["where"] for f in pred.failures] == ["step2"]
    lines = [r.getMessage() for r in caplog.records]
    assert [m for m in lines if "step2" in m] == [
        "LM call step2 failed: LMUnexpectedError: [local/scripted] HTTP 500 from the server"]
    assert not any("Traceback" in m or "Ending the trajectory" in m for m in lines), lines
