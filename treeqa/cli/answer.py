"""treeqa ask, serve and view: one question, a server of questions, a page of a run."""

from __future__ import annotations

import json
from typing import Annotated

import dspy
import typer

from treeqa import retrievers
from treeqa.cli.common import (
    ApiBaseOption,
    ApiKeyOption,
    CompiledOption,
    CorpusOption,
    LmOption,
    ReaderModelOption,
    RetrieverOption,
    ZeroShotDatasetOption,
    ZeroShotOption,
    app,
    fail,
    load_searching,
    printable,
)
from treeqa.data import DEFAULT_DATASET
from treeqa.lm import adapter_for, is_embedded, memory_only_cache
from treeqa.programs import DEFAULT_PROGRAM, SIMPLEST, QAProgram, build_program, uses_retriever
from treeqa.programs.common import check_question
from treeqa.programs.compiled import run_adapters_with
from treeqa.settings import redact


def zero_shot(program: str, dataset: str, retriever: str | None, corpus: str | None) -> QAProgram:
    """`program` uncompiled, searching `dataset`'s corpus (or your own `corpus`) if it searches."""
    searches = uses_retriever(program)
    index = retrievers.get_retriever(dataset, retriever or retrievers.DEFAULT_KIND, corpus=corpus) if searches else None
    return build_program(program, index)


@app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    compiled: CompiledOption = None,
    program: ZeroShotOption = SIMPLEST,
    dataset: ZeroShotDatasetOption = DEFAULT_DATASET,
    retriever: RetrieverOption = None,
    corpus: CorpusOption = None,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    reader_model: ReaderModelOption = None,
    tree: Annotated[bool, typer.Option("--tree", help="Also print the search tree.")] = False,
    cache: Annotated[bool, typer.Option(help="Answer from DSPy's response cache when this question was asked "
                                             "before (kept per model and endpoint).")] = True,
) -> None:
    """Answer one question with a compiled program (or a zero-shot one) and print the answer."""
    # late: tests replace treeqa.lm.get_lm, so it is read at call time
    from treeqa.lm import get_lm

    try:
        question = check_question(question, "ask")
        if compiled:
            qa = load_searching(compiled, retriever, corpus, lm=lm, reader_model=reader_model, api_base=api_base,
                                cache=cache)[0]
        else:
            qa = zero_shot(program, dataset, retriever, corpus)
        model = get_lm(lm, api_base=api_base, cache=cache)
        run_adapters_with(qa, model, cache, reader_model)
        with dspy.context(lm=model, adapter=adapter_for(model)):
            prediction = qa(question=question)
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)
    failures = getattr(prediction, "failures", None) or []
    for failure in failures:
        typer.secho(printable(redact(f"failed call: {failure}")), fg=typer.colors.YELLOW, err=True)
    if not prediction.answer:
        fail(f"no answer: {len(failures)} LM call(s) failed" if failures else "the program gave an empty answer")
    typer.echo(printable(prediction.answer))
    if tree:
        typer.echo(printable(json.dumps(getattr(prediction, "tree", None), indent=2, ensure_ascii=False,
                                        default=str)))


def load_served(compiled: str | None, program: str, dataset: str, retriever: str | None, lm: str,
                api_base: str | None, corpus: str | None = None, cache: bool = True, reader_model: str | None = None):
    """(served program, LM, program info) for `serve`: a compiled file, or a zero-shot program."""
    # late: tests replace treeqa.lm.get_lm; treeqa.serving loads FastAPI, which only `serve` needs
    from treeqa.lm import get_lm
    from treeqa.serving import Served, program_info

    if compiled:
        qa, found, _, corpus = load_searching(compiled, retriever, corpus, lm=lm, reader_model=reader_model,
                                              api_base=api_base, cache=cache)
        name = found.program
        dataset = (corpus or found.dataset) if uses_retriever(name, *found.build_settings()) else None
    else:
        found, name = None, program
        qa = zero_shot(program, dataset, retriever, corpus)
        dataset = (corpus or dataset) if uses_retriever(program) else None
    model = get_lm(lm, api_base=api_base, cache=cache)
    run_adapters_with(qa, model, cache, reader_model)
    if hasattr(model, "wait_ready"):
        model.wait_ready()  # an endpoint's first-use warm-up at start-up, not in the first request
    return Served(qa, model, adapter_for(model), program_info(qa, name, model, dataset, found))


@app.command("serve")
def serve(
    compiled: CompiledOption = None,
    program: ZeroShotOption = DEFAULT_PROGRAM,
    dataset: ZeroShotDatasetOption = DEFAULT_DATASET,
    retriever: RetrieverOption = None,
    corpus: CorpusOption = None,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    reader_model: ReaderModelOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    concurrency: Annotated[int, typer.Option(help="Requests answered at once (the embedded engine: 1).")] = 1,
    queue: Annotated[int, typer.Option(help="Requests that may wait; more get 503.")] = 8,
    time_limit: Annotated[float, typer.Option(help="Seconds a request may take, waiting included (504).")] = 300.0,
    body_timeout: Annotated[float, typer.Option(help="Seconds a request's body may take to arrive whole (408, "
                                                     "and the connection closed).")] = 15.0,
    cache: Annotated[bool, typer.Option(help="Answer a question asked recently from DSPy's response cache "
                                             "(in memory, TREEQA_MEMORY_CACHE_ENTRIES responses, kept per "
                                             "model and endpoint).")] = True,
    allow_host: Annotated[list[str] | None, typer.Option(
        help="Another Host name to answer to (the name a proxy or a browser uses for this server; "
             "repeatable; '*' for any). Without it: the --host address, and for 127.0.0.1 or 0.0.0.0 "
             "the machine's own names.")] = None,
) -> None:
    """Serve a program over HTTP: POST /v1/ask, a streaming /v1/ask/stream, and a page at /."""
    # heavy: the server's own dependency, loaded by `serve` alone
    import uvicorn

    # late: treeqa.serving loads FastAPI, which only `serve` and `view` need
    from treeqa.serving import allowed_hosts_for, create_app

    if concurrency < 1 or queue < 0 or not time_limit > 0:
        fail(f"--concurrency must be 1 or more (got {concurrency}), --queue 0 or more (got {queue}) and "
              f"--time-limit a positive number of seconds (got {time_limit:g})")
    if not body_timeout > 0:
        fail(f"--body-timeout must be a positive number of seconds (got {body_timeout:g})")
    try:
        served = load_served(compiled, program, dataset, retriever, lm, api_base, corpus, cache=cache,
                             reader_model=reader_model)
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)
    memory_only_cache()  # a server's repeats are recent; a disk cache would grow its RSS and disk without bound
    if is_embedded(served.lm) and concurrency > 1:
        typer.echo("the embedded engine answers one call at a time: --concurrency set to 1")
        concurrency = 1
    typer.echo(f"serving {served.info['program']} ({served.info['optimizer']}) on http://{host}:{port}/")
    allowed = allowed_hosts_for(host, allow_host or [])
    uvicorn.run(create_app(served, concurrency, queue, time_limit, allowed_hosts=allowed, body_timeout=body_timeout),
                host=host, port=port, log_level="info")


@app.command("view")
def view(
    run_dir: Annotated[str, typer.Argument(help="A finished evaluate or optimize folder.")],
    out: Annotated[str | None, typer.Option(help="The HTML file to write (default: RUN_DIR/view.html).")] = None,
) -> None:
    """Write one static HTML file for a finished run: its summary and every question's search tree."""
    # late: importing treeqa.serving loads FastAPI (its __init__ imports the app): kept off the CLI's start
    from treeqa.serving import write_view

    try:
        path = write_view(run_dir, out)
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)
    typer.echo(f"wrote {path}")

