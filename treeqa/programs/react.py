"""ReAct (Yao et al. 2023) as a search baseline: DSPy's own `dspy.ReAct` with one tool that
searches the corpus, wrapped so it reports what the other programs report (the steps as a
tree, the passages found, the failed calls) and one failed call never loses the question.

Example:
    >>> react = ReActSearch(get_retriever("hotpotqa"))
    >>> pred = react(question="Which city is the birthplace of the director of Jaws?")
    >>> pred.answer, [n["retrieved_by"] for n in pred.tree["nodes"]]
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.exceptions import ContextWindowExceededError

from treeqa.programs.common import (
    Retrieving,
    check_ints,
    check_question,
    is_our_bug,
    record_failure,
    safe_call,
    text_key,
)
from treeqa.programs.steps import StepTrace
from treeqa.retrievers.base import Retriever
from treeqa.signatures.answer import AnswerFromPassages, clean_answer
from treeqa.signatures.budget import REASONING_TOKENS, budget, predict
from treeqa.signatures.formatting import format_passages
from treeqa.signatures.react import SearchThenAnswer

FINISH = "finish"  # the tool dspy.ReAct adds to end the search
REPEATS_ANSWERED = 1  # repeated queries answered with a request for a new one; the next ends the search


@dataclass
class _Run:
    """One question's search as the agent's steps and the search tool report it."""

    retriever: Retriever
    k: int
    passage_chars: int
    failures: list[dict] = field(default_factory=list)
    # one entry per agent step that was answered ({"thought", "tool", "args", "search"}) or failed
    # ({"failure"}); "search" is filled by the tool: {"query", "passages", "failure"}
    steps: list[dict[str, Any]] = field(default_factory=list)
    searched: dict[str, int] = field(default_factory=dict)  # text_key -> the step that first searched it
    repeats: int = 0  # searches not made because their query had been searched before
    bug: BaseException | None = None  # an error in treeqa's own code inside the tool (re-raised)


# The question being answered. The tool is a plain function, and DSPy deep-copies programs (and
# with them the agent and its tools) for each optimizer candidate, so the tool cannot close over
# one program: it reads the run its own thread's `forward` set.
_RUN: ContextVar[_Run | None] = ContextVar("treeqa_react_run", default=None)


class StepFailed(ValueError):
    """An agent step whose LM call failed; a ValueError, which `dspy.ReAct` takes as the end of
    the search."""


class _StepFailureLoggedOnce(logging.Filter):
    """`dspy.ReAct` logs the ValueError that ends its loop with five frames of traceback ("Ending
    the trajectory: ..."); a `StepFailed` was already logged in one line where it was recorded
    (`record_failure`), so DSPy's copy is dropped: 6-12 tracebacks a run against a failing server."""

    def filter(self, record: logging.LogRecord) -> bool:
        return StepFailed.__name__ not in record.getMessage()


logging.getLogger("dspy.predict.react").addFilter(_StepFailureLoggedOnce())


class AgentStep(dspy.Predict):
    """ReAct's step predictor, made to end the search on a failed call instead of the question.

    `dspy.ReAct` ends its loop and goes on to the answer on a ValueError from a step, but lets
    any other error (a reply that does not parse, a timeout) out of the whole module, and the
    searches made so far are lost with it. This records the failure and raises `StepFailed`, so
    the agent answers from what it found. A context-window error is recorded and let through:
    ReAct drops the oldest step from the trajectory and asks again.
    """

    def forward(self, **kwargs):
        run = _RUN.get()
        try:
            pred = super().forward(**kwargs)
        except Exception as exc:
            if run is None or is_our_bug(exc):
                raise
            where = f"step{len(run.steps) + 1}"
            record_failure(run.failures, where, exc)
            if isinstance(exc, ContextWindowExceededError):
                raise
            run.steps.append({"failure": run.failures[-1]})
            raise StepFailed(f"{where}: {type(exc).__name__}") from exc
        if run is not None:
            args = pred.next_tool_args if isinstance(pred.next_tool_args, dict) else {}
            unwrapped = unwrap_schema_echo(args)
            step = {"thought": str(pred.next_thought or "").strip(), "tool": pred.next_tool_name,
                    "args": unwrapped, "search": None}
            if unwrapped != args:
                pred.next_tool_args = unwrapped  # what dspy.ReAct calls the tool with
                step["args_as_written"] = args
            run.steps.append(step)
            if step["tool"] == search.__name__ and run.repeats >= REPEATS_ANSWERED \
                    and text_key(unwrapped.get("query")) in run.searched:
                # the agent was asked for a new query and repeated one again: end the search here
                # (dspy.ReAct stops on `finish` and goes on to the answer)
                pred.next_tool_name, pred.next_tool_args = FINISH, {}
                run.repeats += 1
                step["ended"] = "repeated_query"
        return pred


SCHEMA_KEYS = {"type", "description", "value", "title"}


def unwrap_schema_echo(args: dict) -> dict:
    """The arguments with each value the model wrapped in the argument's schema taken out of it.

    The agent's prompt shows each tool argument as its JSON schema (`{"query": {"type":
    "string", "description": ...}}`), and the embedded 1.5B model answers in that shape, with
    its query as the "description" (or a "value"): on the first two reference questions every
    one of its 8 searches came back as `{"query": {"type": "string", "description": "lev yilmaz
    animation, ..."}}`, which the tool refuses, so ReAct never searched. Such a value is taken
    out (the step keeps what was written, `args_as_written`); any other shape is left for the
    tool to refuse. A model that copies the schema without filling it in leaves the argument's own
    description as the query; the search refuses that (`DescriptionAsQuery`): on 2 of the first
    12 reference questions the agent searched with the description itself, and found nothing
    related to the question (one answered "Roald Dahl" from it)."""
    out = {}
    for name, value in args.items():
        if isinstance(value, dict) and set(value) <= SCHEMA_KEYS:
            inner = value.get("value", value.get("description"))
            if isinstance(inner, str) and inner.strip():
                value = inner
        out[name] = value
    return out


def repeat_observation(step: int) -> str:
    """What the agent is shown instead of a search it already made (`step` counts from 1; the
    trajectory's fields count from 0)."""
    return (f"You made this search before: its passages are in observation_{step - 1}, and the same query "
            "finds the same passages. Search for what is still missing, such as a name those passages gave "
            "and the fact the question asks about it, or finish if you can answer.")


def search(query: str) -> str:
    """Search the document collection; returns the best-matching passages as "[n] Title: text"."""
    run = _RUN.get()
    if run is None:
        raise RuntimeError("the search tool works only while the program answers a question")
    try:
        return _search(run, query)
    except Exception as exc:
        if is_our_bug(exc):  # dspy.ReAct would make it an observation; forward re-raises it
            run.bug = exc
        raise


def _search(run: _Run, query: str) -> str:
    where = f"search@step{len(run.steps)}"
    found: dict[str, Any] = {"query": " ".join(str(query).split()), "passages": [], "failure": None}
    if run.steps and "failure" not in run.steps[-1]:
        run.steps[-1]["search"] = found  # the step that called the tool
    if not found["query"]:
        found["failure"] = {"where": where, "error": "EmptyQuery", "message": "the agent searched with an empty query"}
        run.failures.append(found["failure"])
        return "The query was empty: search with a few words, such as a name and the fact you need."
    key = text_key(found["query"])
    if key == text_key(SEARCH_TOOL_ARGS["query"]):  # the schema copied whole: the description, no query
        found["failure"] = {"where": where, "error": "DescriptionAsQuery",
                            "message": "the agent searched with the argument's description instead of a query"}
        run.failures.append(found["failure"])
        return ("That is the description of the query argument, not a query. Write the words to search for "
                "instead: the name in the question and the fact about it that you need.")
    if key in run.searched:  # the same passages again: ask for a new query instead (see REPEATS_ANSWERED)
        found["repeat_of"] = run.searched[key]
        run.repeats += 1
        return repeat_observation(found["repeat_of"])
    try:
        passages = list(run.retriever.search(found["query"], run.k))
    except Exception as exc:  # noqa: BLE001 - a failed search is the agent's observation, not the question's end
        if is_our_bug(exc):
            raise
        record_failure(run.failures, where, exc)
        found["failure"] = run.failures[-1]
        return f"The search failed ({type(exc).__name__}). Try another query, or finish with what you have."
    found["passages"] = passages
    run.searched[key] = len(run.steps)  # a failed search may be tried again
    if not passages:
        return "No passages found."
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(format_passages(passages, run.passage_chars), 1))


SEARCH_TOOL_ARGS = {"query": "a few words to search for, such as a name and the fact you need"}


class ReActSearch(Retrieving):
    """ReAct as a search agent: each step the model writes a thought and either searches the
    corpus (top-`k` passages come back as the observation) or finishes; then it answers from the
    whole trajectory. It is `dspy.ReAct` itself (`agent`), with `search` as its one tool.

    Departures from the paper (Yao et al. 2023), and why:
      - The paper's Wikipedia tools (search[entity] for a page's first sentences, lookup[string]
        within it) and its finish[answer] action become one `search` over this package's passage
        index, the one every program here searches, and DSPy's `finish`, after which a separate
        extract call writes the answer from the trajectory (DSPy's design, kept so the answer
        goes through the same one-entity instructions and `clean_answer` as every program's).
      - It is prompted zero-shot with our own instructions (`SearchThenAnswer`) and DSPy's agent
        text instead of the paper's six hand-written HotpotQA trajectories; compiling can add demos.
      - The paper gave HotpotQA 7 steps (and its best variant backed off to CoT-SC when ReAct
        did not finish in them); here `max_iters` (default 4: the 2-hop questions need two
        searches and a finish) steps, then the answer from what was found, with no back-off to
        another method, so that the baseline is ReAct alone.
      - A failed step (an unparseable reply, a timeout) ends the search and the agent answers
        from what it has (`AgentStep`); a failed search is shown to the agent as its observation.
      - A tool argument the model wrapped in the schema the prompt shows it (`{"query": {"type":
        "string", "description": "<the query>"}}`, what the embedded model writes) is taken out
        of it before the tool is called (`unwrap_schema_echo`; the tree's `args_unwrapped`
        counts the steps).
      - A search whose query (its words, lowercased) was searched before is not made again: the
        agent is shown a request for a new query instead, and a second repeat ends the search
        (stop `repeated_query`; the tree's `repeats` counts them). Without it the embedded model
        copied its first query into every later step (7 of the first 7 reference questions,
        `benchmarks/runs/hotpotqa-dev100/react-no-repeat-guard`), as Self-Ask, IRCoT and
        ITER-RETGEN here stop on a repeated query; the paper's agent had no such guard.
      - A failed answer call (most often its reasoning running past its token budget, cut off
        before the answer, as ITER-RETGEN's did on 21 of the reference 100) is recorded and
        answered again without reasoning from the passages the searches found (`answer_only`,
        one more call), so a search that found the answer does not end with none.

    The call bound is `max_iters + 2`: at most one LM call per iteration, the extract call and
    its answer-only retry.
    dspy.ReAct retries a call refused for exceeding the context window (up to 3 tries, each
    dropping the oldest step); a refused request makes no completion, records no usage and is
    not counted, like DSPy's retries of an unparseable reply.

    Args:
        retriever: searches the corpus (required).
        max_iters: the most agent steps (searches, or the finish step) before the answer.
        k: passages each search returns.
        passage_chars: each passage is cut to this many characters in the observation (the
            whole trajectory is in every step's prompt).

    Example:
        >>> treeqa.configure("local")
        >>> program = treeqa.build_program("react", treeqa.get_retriever(dataset="hotpotqa"))
        >>> program(question="Who was born first, Lecrae or Gawvi?").answer
    """

    name = "react"
    reader = "agent.extract.predict"  # ReAct's extract: a ChainOfThought over the trajectory
    tree_shape = "steps"
    # no annotation_demos: both of its predictors read a trajectory, not question + passages

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        return {"max_iters": (2, 4, 6), "k": (2, 3, 5)}

    @classmethod
    def call_bound(cls, settings) -> int:
        return settings["max_iters"] + 2

    def __init__(self, retriever: Retriever | None = None, *, max_iters: int = 4, k: int = 3,
                 passage_chars: int = 500):
        super().__init__(retriever)
        check_ints(max_iters=max_iters, k=k)
        check_ints(50, passage_chars=passage_chars)
        self.max_iters, self.k, self.passage_chars = max_iters, k, passage_chars
        agent = dspy.ReAct(SearchThenAnswer, tools=[dspy.Tool(search, arg_desc=SEARCH_TOOL_ARGS)],
                           max_iters=max_iters)
        agent.react = AgentStep(agent.react.signature, **{**agent.react.config,
                                                          "max_tokens": SearchThenAnswer.step_max_tokens})
        agent.extract.predict.update_config(max_tokens=budget(SearchThenAnswer) + REASONING_TOKENS)
        self.agent = agent
        self.answer_only = predict(AnswerFromPassages)

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        run = _Run(self.retriever, self.k, self.passage_chars)
        token = _RUN.set(run)
        try:
            pred = safe_call(self.agent, run.failures, "answer", question=question, max_iters=self.max_iters)
        finally:
            _RUN.reset(token)
        if run.bug is not None:
            raise run.bug
        trace, finished = self._trace(question, run)
        retried = None
        if pred is None:  # the extract call failed: answer from the passages found, without reasoning
            shown = format_passages(trace.distinct_retrieved(), self.passage_chars)
            retried = safe_call(self.answer_only, run.failures, "answer_only", question=question, passages=shown)
        reply = pred if pred is not None else retried
        answer = clean_answer(reply.answer) if reply is not None else ""
        failed = [f for f in run.failures if f["where"] in ("answer", "answer_only")]
        if reply is None:
            trace.step("reject", note="the answer call and its answer-only retry failed", failures=failed)
        elif not answer:
            trace.step("reject", note="the answer call gave no answer", failures=failed)
        elif retried is not None:
            trace.step("accept", note="[the answer call failed: answered again without reasoning from the "
                                      "passages found]", failures=failed)
        else:
            trace.step("accept", note=str(getattr(pred, "reasoning", "") or "").strip())
        retrieved = trace.distinct_retrieved()
        tree = trace.tree(stop=self._stop(run, finished), iterations=len(run.steps),
                          searches=sum(n["action"] == "search" for n in trace.nodes),
                          failures=len(run.failures), distinct_retrieved=len(retrieved),
                          args_unwrapped=sum("args_as_written" in step for step in run.steps),
                          repeats=run.repeats)
        return dspy.Prediction(answer=answer, failures=run.failures, retrieved=retrieved, tree=tree,
                               stats=tree["stats"], trajectory=pred.trajectory if pred is not None else {})

    def _trace(self, question: str, run: _Run) -> tuple[StepTrace, bool]:
        """One node per agent step (the finish step is the answer's node); whether it finished."""
        trace, finished = StepTrace(question), False
        for n, step in enumerate(run.steps, start=1):
            if "failure" in step:
                trace.step("reject", note="the step's call failed", failures=[step["failure"]])
            elif step["tool"] == FINISH:
                finished = True
            elif step.get("ended"):  # a query repeated after the agent was asked for a new one
                trace.step("reject", query=" ".join(str(step["args"].get("query", "")).split()),
                           note=f"{step['thought']} [the query was searched before and a new one asked for: "
                                "the search ended here]")
            elif step["search"] is None:  # the tool refused the arguments before searching
                failure = {"where": f"search@step{n}", "error": "BadToolArguments",
                           "message": f"search was called with {step['args']!r}"[:500]}
                run.failures.append(failure)
                trace.step("reject", note=step["thought"], failures=[failure])
            else:
                found = step["search"]
                if "repeat_of" in found:
                    trace.step("reject", query=found["query"],
                               note=f"{step['thought']} [searched at step {found['repeat_of']}: not searched "
                                    "again, a new query asked for]")
                    continue
                failed = [found["failure"]] if found["failure"] else []
                trace.step("reject" if failed else "search", query=found["query"], passages=found["passages"],
                           note=step["thought"], failures=failed)
        return trace, finished

    def _stop(self, run: _Run, finished: bool) -> str:
        if run.steps and run.steps[-1].get("ended"):
            return "repeated_query"
        if finished:
            return "finish"
        if run.steps and "failure" in run.steps[-1]:
            return "step_failed"
        if len(run.steps) >= self.max_iters:
            return "max_iters"
        return "context_window"  # dspy.ReAct could not shorten the trajectory enough
