"""treeqa programs, evaluate, replay and compare: runs over questions, written to folders that resume."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from treeqa.cli.common import (
    PRESET_LIST,
    PROGRAM_NAMES,
    ApiBaseOption,
    ApiKeyOption,
    ConcurrencyOption,
    CorpusOption,
    KindOption,
    LmOption,
    OldThreadsOption,
    ReaderModelOption,
    RetrieverOption,
    SpecDefaults,
    app,
    default_split,
    fail,
    load_searching,
    parse_params,
)
from treeqa.data import DEFAULT_DATASET
from treeqa.data.samples import selection
from treeqa.evaluation.decisions import describe
from treeqa.evaluation.loop import RunAborted
from treeqa.evaluation.replay import replay_run
from treeqa.evaluation.runs import EvalSpec, compiled_params, run_evaluation
from treeqa.evaluation.stats import PAIRED_KEYS, compare_records
from treeqa.evaluation.tables import comparison_table, data_line, markdown_table, seconds_table
from treeqa.optimize import fitting_optimizers
from treeqa.programs import BASELINE, COMPARED, PROGRAMS
from treeqa.retrievers import DEFAULT_KIND, registered_corpus

EVAL = SpecDefaults(EvalSpec)


@app.command("programs")
def programs_cmd() -> None:
    """List the registered programs and what each declares (add one: a file in treeqa/programs/, or
    a module of your own named in TREEQA_PROGRAMS)."""
    for name, cls in PROGRAMS.items():
        summary = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        summary = summary.split(". ")[0].rstrip(".")
        typer.echo(f"{name}: {cls.__module__}.{cls.__qualname__}" + (f" - {summary}" if summary else ""))
        compile_ = cls.default_compile
        facts = [f"searches a corpus: {'yes' if cls.retrieves else 'no'}",
                 f"tree: {cls.tree_shape or 'none'}",
                 f"presets: {', '.join(cls.presets) or 'none'}",
                 f"settings searched: {', '.join(cls.settings_space()) or 'none'}",
                 f"default compile: {compile_['optimizer']} on {compile_['train']} train questions",
                 f"optimizers: {', '.join(fitting_optimizers(cls))}"]
        typer.echo("    " + "; ".join(facts))


DatasetOption = Annotated[str | None, typer.Option(help="Dataset to evaluate on (default: the one a --compiled "
                                                       f"program was compiled on, else {DEFAULT_DATASET}).",
                                                  show_default=False)]
SplitOption = Annotated[str | None, typer.Option(help="Split (default: the one the papers report: dev for the "
                                                     "multi-hop sets, test for nq, triviaqa and webq).")]
SkipOption = Annotated[int, typer.Option(help="Leave out the first SKIP questions of the seeded order (a sample "
                                              "already examined), taking the next N.")]
PresetOption = Annotated[str | None, typer.Option(help=f"beam only: the paper's settings, one of {PRESET_LIST}.")]
ParamOption = Annotated[list[str], typer.Option(help="Program hyperparameter key=value (repeatable); with "
                                                     "--compiled it replaces the stored setting.")]
CacheOption = Annotated[bool, typer.Option(help="Use DSPy's response cache (off: every call reaches the LM, "
                                                "so reported costs are real).")]
RetryOption = Annotated[bool, typer.Option("--retry-failed", help="Run again the questions whose records hold a "
                                                                  "failed LM call or an error.")]
MaxErrorsOption = Annotated[int, typer.Option(help="Stop after this many questions in a row whose LM calls all "
                                                   "failed (0: never stop).")]
SampleOption = Annotated[str | None, typer.Option("--sample", help="A committed sample by name (treeqa/data/samples/"
                                                                   "index.json, e.g. hotpotqa-dev100): exactly its "
                                                                   "questions, by id, in order; it names its dataset "
                                                                   "and split.", show_default=False)]
IdsOption = Annotated[str | None, typer.Option("--ids", help="A file of question ids, one a line: exactly those "
                                                              "questions of --dataset/--split, in that order.",
                                               show_default=False)]
BudgetOption = Annotated[float | None, typer.Option(help="Seconds one question may take; one past it is recorded "
                                                         "as failed and the run goes on.")]


@app.command("evaluate")
def evaluate_cmd(
    program: Annotated[str | None, typer.Option(help=f"One of {PROGRAM_NAMES}.")] = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    n: Annotated[int | None, typer.Option("--n", "--dev", help=f"Number of questions (seeded sample) "
                                                              f"[default: {EVAL.n}].", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = EVAL.seed,
    skip: SkipOption = EVAL.skip,
    sample_name: SampleOption = None,
    ids: IdsOption = None,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    reader_model: ReaderModelOption = None,
    retriever: RetrieverOption = None,
    corpus: CorpusOption = None,
    preset: PresetOption = None,
    param: ParamOption = [],
    concurrency: ConcurrencyOption = 1,
    threads: OldThreadsOption = None,
    out: Annotated[str | None, typer.Option(help="Output folder (default under runs/).")] = None,
    compiled: Annotated[str | None, typer.Option(help="A compiled program (.json) to evaluate.")] = None,
    cache: CacheOption = EVAL.cache,
    retry_failed: RetryOption = False,
    max_errors: MaxErrorsOption = 10,
    question_budget: BudgetOption = None,
) -> None:
    """Evaluate a program on a dataset; results append to OUT/predictions.jsonl, and a rerun resumes."""
    try:
        dataset, split, asked = asked_questions(sample_name, ids, dataset, split, n, EVAL.n)
        sample = {**asked, "seed": seed, "skip": skip, "lm": lm, "api_base": api_base, "reader_model": reader_model,
                  "threads": threads or concurrency, "cache": cache}
        spec, loaded = _evaluation_spec(program, compiled, dataset, split, retriever, corpus, preset,
                                        parse_params(param), sample)
        result = run_evaluation(spec, out, program=loaded, retry_failed=retry_failed, max_errors=max_errors or None,
                                question_budget=question_budget)
    except (ValueError, FileNotFoundError, RunAborted) as exc:
        fail(exc)
    _print_run(result)


def asked_questions(sample_name: str | None, ids: str | None, dataset: str | None, split: str | None,
                    n: int | None, default_n: int) -> tuple[str | None, str | None, dict]:
    """(dataset, split, the spec's question fields): `n` of the seeded order, or the ids of
    --sample/--ids with their dataset and split (n is their number; an --n that says otherwise
    is left for the spec to refuse)."""
    chosen = selection(sample_name, ids, dataset, split)
    if chosen is None:
        return dataset, split, {"n": default_n if n is None else n}
    return (chosen.dataset or dataset, chosen.split or split,
            {"n": len(chosen.ids) if n is None else n, "ids": chosen.ids, "sample": chosen.name})


def _evaluation_spec(program, compiled, dataset, split, retriever, corpus, preset, params: dict, sample: dict):
    """(spec, loaded program or None) for `evaluate`: a --compiled file gives the program, its
    settings (--param replaces them; the spec says so), what it searches and its dataset unless told."""
    loaded = None
    if compiled:
        # the spec (and so the summary and recall@15) must say what the program searched
        loaded, found, retriever, corpus = load_searching(compiled, retriever, corpus, expect=program,
                                                          overrides=params, lm=sample["lm"],
                                                          reader_model=sample["reader_model"],
                                                          api_base=sample["api_base"], cache=sample["cache"])
        program = found.program
        dataset = dataset or found.dataset  # questions of the set it was compiled for, unless told
        stored, preset = found.build_settings()
        params = {**stored, **params, **compiled_params(compiled)}
    if program is None:
        fail("name a --program, or give a --compiled file")
    dataset = dataset or DEFAULT_DATASET
    spec = EvalSpec(program=program, dataset=dataset, split=split or default_split(dataset),
                    retriever=retriever or DEFAULT_KIND, corpus=corpus, preset=preset, params=params, **sample)
    return spec, loaded


def _print_run(result: dict) -> None:
    typer.echo(data_line(result["data"]))
    typer.echo(result["table"])
    typer.echo("EM and F1 with 95% bootstrap intervals over the questions.")
    if "decisions" in result["summary"]:
        typer.echo(f"decisions: {describe(result['summary']['decisions'])}")
    typer.echo(f"written to {result['out']}")


@app.command("replay")
def replay_cmd(
    records: Annotated[str, typer.Argument(help="A ToR run's folder, or a judged beam's (its predictions.jsonl "
                                                          "holds the trees).")],
    compiled: Annotated[str, typer.Option(help="The compiled ToR or beam to answer with: the recorded run's "
                                               "search, another reading (read_top, the reader's demos).")],
    source_compiled: Annotated[str | None, typer.Option(help="The compiled file the recorded run searched "
                                                             "with (default: the one its folder names).")] = None,
    param: Annotated[list[str], typer.Option(help="A reading setting key=value in place of the compiled one "
                                                  "(read_top, max_context_chars, max_paragraph_chars; fusion, "
                                                  "whose new reader reads zero-shot: fusion=passages is rta's "
                                                  "reader; the beam's reading=passages likewise).")] = [],
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    out: Annotated[str | None, typer.Option(help="Output folder (default under runs/).")] = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache.")] = True,
) -> None:
    """Answer again from a ToR run's recorded searches, or a beam's under a path judge (its best
    state read again): one reader call a question, for a compile that changes only the reading.
    A program whose search differs is refused; questions the run has not reached yet are left
    for a rerun, which resumes."""
    try:
        result, replayed, sample = replay_run(Path(records), compiled, source_compiled, lm, api_base, out, cache,
                                              overrides=parse_params(param))
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)
    typer.echo(data_line(result["data"]))
    typer.echo(result["table"])
    cost = result["searched"]
    if cost["questions"]:
        typer.echo(f"the recorded searches of these questions took {cost['search_lm_calls_per_q']} LM calls and "
                   f"{cost['search_seconds_per_q']} s a question (median {cost['search_seconds_median']} s) "
                   "before this reading" + (f" ({cost['includes_reading']} of their records, made before the reader's "
                                             "calls were kept apart, count their reading too)"
                                             if cost["includes_reading"] else ""))
    if replayed < sample:
        typer.echo(f"replayed {replayed} of the {sample} questions: the recorded run has no search for the rest "
                   "yet; run this again when it has")
    typer.echo(f"written to {result['out']}")


@app.command("compare")
def compare_cmd(
    programs: Annotated[str, typer.Option(help="Comma-separated programs, run one after another.")] = (
        ",".join(COMPARED)),
    against: Annotated[str | None, typer.Option(help="The program every other one is paired with "
                                                    "(default: rta when listed, else the first).")] = None,
    dataset: Annotated[str | None, typer.Option(help=f"Dataset to evaluate on [default: {DEFAULT_DATASET}].",
                                                show_default=False)] = None,
    split: Annotated[str | None, typer.Option(help="Split (default: the one the papers report).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="Number of questions (seeded sample) [default: 5].",
                                          show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    sample_name: SampleOption = None,
    ids: IdsOption = None,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    retriever: KindOption = DEFAULT_KIND,
    corpus: CorpusOption = None,
    concurrency: ConcurrencyOption = 1,
    threads: OldThreadsOption = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache.")] = True,
) -> None:
    """Programs side by side on the same questions (beam with the NQ preset), each paired with one baseline."""
    names = [p.strip() for p in programs.split(",") if p.strip()]
    if not names:
        fail("name at least one program")
    base = against or (BASELINE if BASELINE in names else names[0])
    if base not in names:
        fail(f"--against {base!r} is not among --programs")
    rows, records, data = {}, {}, None
    try:  # every name checked before the first program runs: a typo in the last is not an hour lost
        dataset, split, asked = asked_questions(sample_name, ids, dataset, split, n, 5)
        dataset = dataset or DEFAULT_DATASET
        specs = {name: EvalSpec(program=name, dataset=dataset, split=split or default_split(dataset), **asked,
                                seed=seed, lm=lm, api_base=api_base, retriever=retriever, corpus=corpus,
                                threads=threads or concurrency, cache=cache,
                                preset=PROGRAMS[name].default_preset if name in PROGRAMS else None)
                 for name in names}
        if corpus is not None:
            registered_corpus(corpus)
        for name, spec in specs.items():
            result = run_evaluation(spec)
            rows[name], records[name], data = result["summary"], result["records"], result["data"]
            typer.echo(f"{name}: written to {result['out']}")
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)
    typer.echo(data_line(data))
    typer.echo(markdown_table(rows))
    typer.echo("\nWhere the seconds go (a question's mean):")
    typer.echo(seconds_table(rows))
    pairs = {f"{name} vs {base}": compare_records(records[name], records[base], keys=PAIRED_KEYS)
             for name in names if name != base}
    if pairs:
        typer.echo("\nPaired on the same questions (95% paired-bootstrap interval, exact McNemar on EM):")
        typer.echo(comparison_table(pairs))

