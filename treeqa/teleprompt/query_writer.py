"""`query`: compile a program's query writer against retrieval, on paths built from the annotations.

The contract's `query_writer` is the predictor whose output is the next search: under MPC
expansion the review programs' completion, which writes the paragraph a path is missing; in the
beam with retrieved evidence, Ask, whose sub-questions are each searched. What it is for is the
next retrieval, not the answer, so it is scored on that: a reply counts 1 when the program's own
searches with it, made exactly as at question time (`completion_queries`: ToR's paragraph
cleaned and cut to `max_query_chars`, the beam's new sub-questions as it keeps them;
`search_below`: `expansion_width` paragraphs, ToR's past the path), find a gold paragraph the
path lacks. The examples need no run of the program: each annotated train
question gives the path MPC sees when the search expands a relevant paragraph that is not
enough, one gold paragraph alone, with the other gold paragraphs missing; the first two gold
paragraphs each take that place in turn (both orders of a two-hop question). DSPy's
BootstrapFewShotWithRandomSearch draws demos from the paths the writer got right, one LM call
per evaluated example; the writer as prepared is kept unless a candidate finds more
(`one_predictor.keep_better`), and each answer is logged in `query-calls.jsonl`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import dspy
from dspy.teleprompt.teleprompt import Teleprompter

from treeqa.programs.review_run import ReviewRun
from treeqa.teleprompt.annotated_demos import as_passage, usable
from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.one_predictor import PredictorCalls, demo_pool, keep_better, random_search, score

log = logging.getLogger(__name__)
PATHS_PER_QUESTION = 2  # each of the first two gold paragraphs alone, the others missing


def query_writer_of(program: dspy.Module) -> tuple[str, dspy.Predict]:
    """(name, predictor) of the program's query writer, as its contract declares it; a program
    whose settings give it none (e.g. ToR with expansion=cot) is refused with the reason."""
    cls = type(program)
    no_writer = getattr(cls, "no_query_writer", None)
    reason = no_writer(program.settings) if no_writer is not None else "declares no query writer"
    predictors = dict(program.named_predictors())
    if reason or cls.query_writer not in predictors:
        raise ValueError(f"{cls.__name__} {reason or 'declares no query writer'}")
    return cls.query_writer, predictors[cls.query_writer]


def query_examples(program: dspy.Module, trainset: Sequence[dspy.Example]) -> list[dspy.Example]:
    """The writer's inputs for a path of one gold paragraph (as the program shows it), with the
    path and the ids of the gold paragraphs it lacks; ids are the corpus's (`as_passage`), as
    recall counts them."""
    examples = []
    for example in trainset:
        if not usable(example):
            continue
        gold = list({p.id: p for p in map(as_passage, example.annotation["gold"]) if p.text}.values())
        if len(gold) < 2:
            continue
        for first in gold[:PATHS_PER_QUESTION]:
            inputs = program.completion_inputs(example.question, [first])
            examples.append(dspy.Example(**inputs, path=[first], missing_ids=[p.id for p in gold if p is not first])
                            .with_inputs(*inputs))
    if not examples:
        raise ValueError("no training question has two or more annotated gold paragraphs: the query compiler "
                         "builds its paths from them (hotpotqa, 2wikimultihopqa or musique train)")
    return examples


class RetrievalHit:
    """The metric: 1.0 when a search with the written queries (the beam's sub-questions; ToR's one
    paragraph) finds a gold paragraph the path lacks."""

    def __init__(self, program: dspy.Module):
        self.program = program

    def __call__(self, example: dspy.Example, prediction: dspy.Prediction, trace=None) -> float:
        queries = self.program.completion_queries(prediction, example.question)
        if not queries:
            return 0.0
        run = ReviewRun(example.question)  # the searches' own records, dropped after
        found = [p for query in queries
                 for p in self.program.search_below(run, query, example.path, self.program.expansion_width,
                                                    "query-fit")]
        for failure in run.failures:
            log.warning("a search for the query compile failed: %s", failure)
        return float(any(p.id in example.missing_ids for p in found))


class QueryWriterFit(Teleprompter):
    """Compile the program's query writer on annotated paths against retrieval (see module doc).

    Args:
        calls_path: the JSONL log of the writer's answers (replayed on a rerun); None keeps them in memory.
        max_demos: the most bootstrapped demos a candidate holds.
        candidates: bootstrapped demo sets tried (DSPy's `num_candidate_programs`).
    """

    def __init__(self, calls_path: str | Path | None = None, max_demos: int = 2, candidates: int = 2,
                 threads: int = 1):
        super().__init__()
        self.calls_path = Path(calls_path) if calls_path is not None else None
        self.max_demos, self.candidates, self.threads = max_demos, candidates, threads

    def compile(self, student: dspy.Module, *, trainset: Sequence[dspy.Example], teacher=None, valset=None,
                **kwargs) -> dspy.Module:
        program = student.deepcopy()
        name, writer = query_writer_of(program)
        examples = query_examples(program, trainset)
        metric = RetrievalHit(program)
        prepared, compiled, kept = keep_better(
            writer, examples, PredictorCalls(self.calls_path),
            lambda module, ex: score(module, ex, metric, self.threads),
            lambda module, ex: random_search(module, ex, metric, self.max_demos, self.candidates, self.threads,
                                             pool=demo_pool(writer, ex, self.max_demos)))
        program.query_fit = {"writer": name, "examples": len(examples), "width": program.expansion_width,
                             "prepared_hit_rate": round(prepared, 1), "compiled_hit_rate": round(compiled, 1),
                             "kept": kept, "demos": len(writer.demos)}
        return program


def _bound(per_q: int, n: int, t: dict) -> int:
    """Distinct calls, the log replaying any repeat: the prepared writer and the zero-shot one
    (random search's seeds -3 and -2) on every path, and each of the `candidates` + 1
    bootstrapped demo sets on every path (bootstrapping replays the prepared writer's answers)."""
    return PATHS_PER_QUESTION * n * (t["candidates"] + 3)


def _build(c):
    return QueryWriterFit(calls_path=c.out_dir / "query-calls.jsonl" if c.out_dir is not None else None,
                          max_demos=c.spec.max_demos, candidates=c.tuning["candidates"], threads=c.spec.threads), {}


register(Compiler("query", _build, _bound, needs_annotations=True,
                  fits=lambda cls: bool(getattr(cls, "query_writer", None)), unfit="declares no query writer",
                  refuses=lambda cls, settings: cls.no_query_writer(settings)))
