"""What the commands share: the app and its groups, the options several commands take, errors
that exit cleanly, parsing --param, loading a compiled program with what it searches."""

from __future__ import annotations

import functools
import json
import os
from contextlib import nullcontext
from typing import Annotated

import dspy
import typer
from pydantic import ValidationError

from treeqa.data import EVAL_SPLITS
from treeqa.lm import LOCAL_NAMES
from treeqa.programs import PRESET_NAMES, PROGRAMS, uses_retriever
from treeqa.programs.compiled import CompiledFile, load_program, recorded_adapter_of
from treeqa.programs.compiled.adapters import ENDPOINT_NEEDS_READER_MODEL
from treeqa.retrievers import DEFAULT_KIND
from treeqa.settings import get_settings, redact
from treeqa.signatures.answer import UNPRINTABLE

PROGRAM_NAMES = ", ".join(PROGRAMS)
PRESET_LIST = ", ".join(PRESET_NAMES)

app = typer.Typer(help="Question answering by search (ALLIES beam search, Tree of Reviews) with DSPy.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
model_app = typer.Typer(help="The embedded LLM.", no_args_is_help=True)
index_app = typer.Typer(help="Retrieval indexes.", no_args_is_help=True)
app.add_typer(model_app, name="model")
app.add_typer(index_app, name="index")


class SpecDefaults:
    """A command's defaults read from the spec it fills (`OPT.dev`), so each is written once, there."""

    def __init__(self, spec: type) -> None:
        self._fields = spec.model_fields

    def __getattr__(self, field: str):
        return self._fields[field].default


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters and direction marks (a model's reply or a
    corpus may hold escapes, a bell, a right-to-left override) shown as escapes, not obeyed."""
    return UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


MAX_ERROR_CHARS = 2000  # an error echoes what it refused; a 3 MB setting must not fill the terminal


def _cut(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]} … ({len(text) - limit:,} more characters cut)"


def one_line_errors(command):
    """A command whose bad input (a missing or torn file, a refused folder: the ValueError and
    FileNotFoundError the library raises, each naming what to do) ends in one line, exit 1, never a
    traceback."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            fail(exc)

    return run


def fail(message: str | BaseException) -> None:
    """Print the error (a pydantic error as its messages alone), cut to MAX_ERROR_CHARS, and
    exit with status 1."""
    if isinstance(message, ValidationError):
        message = "\n".join(str(e["msg"]).removeprefix("Value error, ") for e in message.errors())
    typer.secho(f"error: {_cut(redact(str(message)))}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=1)


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


RetrieverOption = Annotated[str | None, typer.Option(help=f"dense or bm25 (default: {DEFAULT_KIND}, or what a "
                                                          "--compiled program was compiled with); gold: each "
                                                          "question's own gold paragraphs (rta's reader alone).")]


KindOption = Annotated[str, typer.Option(help="dense or bm25.")]


# where `ask` and `serve` get their program: a compiled file, or a zero-shot program searching a dataset's corpus
CompiledOption = Annotated[str | None, typer.Option(help="A compiled program (.json) to answer with.")]
ZeroShotOption = Annotated[str, typer.Option(help=f"Zero-shot program when no --compiled is given: one of "
                                                  f"{PROGRAM_NAMES}.")]
ZeroShotDatasetOption = Annotated[str, typer.Option(help="Whose corpus a zero-shot program searches.")]


ConcurrencyOption = Annotated[int, typer.Option(help="Questions answered at once (against an endpoint; the "
                                                       "embedded engine answers one at a time).")]


OldThreadsOption = Annotated[int | None, typer.Option("--threads", hidden=True, help="The old --concurrency.")]


ReaderModelOption = Annotated[str | None, typer.Option(
    help="On an endpoint: the model name it serves a compiled program's LoRA reader under (llama.cpp server "
         "--lora, vLLM --lora-modules NAME=DIR), e.g. openai/treeqa-reader.", show_default=False)]
CorpusOption = Annotated[str | None, typer.Option(help="Search your own corpus (a name from `treeqa index build "
                                                       "--corpus-file FILE --name NAME`) instead.")]


def load_searching(compiled: str, retriever: str | None, corpus: str | None, expect: str | None = None,
                   overrides: dict | None = None, lm: str | None = None, reader_model: str | None = None,
                   api_base: str | None = None, cache: bool = True):
    """(program, CompiledFile, retriever, corpus) of a compiled file, read once: it searches what
    it was compiled against unless `retriever` or `corpus` say otherwise (your own corpus, or
    bm25); `overrides` replace stored settings. A recorded adapter is checked first, and refused
    with `lm` (the run's LM name) other than the embedded model unless `reader_model` names the
    model that endpoint serves the adapter under, before the model or an index is loaded. With
    that endpoint (`api_base`) and `reader_model`, the reader is pointed at the served model while
    loading, so no embedded model is read or needed."""
    found = CompiledFile.read(compiled)
    served = bool(reader_model and lm is not None and lm not in LOCAL_NAMES and api_base)
    if recorded_adapter_of(found, against_base=not served) is not None and lm is not None \
            and lm not in LOCAL_NAMES and not reader_model:
        raise ValueError(f"{compiled}: {ENDPOINT_NEEDS_READER_MODEL}")
    retriever = retriever or found.retriever
    corpus = corpus or found.corpus
    index = None
    settings, preset = found.build_settings()
    searches = uses_retriever(found.program, {**settings, **(overrides or {})}, preset)  # not a GENREAD beam
    if searches and (corpus != found.corpus or retriever != found.retriever):
        # late: tests replace treeqa.retrievers.get_retriever, so it is read at call time
        from treeqa.retrievers import get_retriever

        index = get_retriever(found.dataset, retriever, corpus=corpus)
    # late: tests replace treeqa.lm.get_lm, so it is read at call time
    from treeqa.lm import get_lm

    with dspy.context(lm=get_lm(lm, api_base=api_base, cache=cache)) if served else nullcontext():
        program = load_program(found, retriever=index, expect=expect, overrides=overrides,
                               reader_model=reader_model if served else None)
    return program, found, retriever, corpus


def parse_params(pairs: list[str]) -> dict:
    """`key=value` pairs; values are read as JSON when they parse (numbers, lists, booleans)."""
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
    if dataset not in EVAL_SPLITS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(EVAL_SPLITS)}")
    return EVAL_SPLITS[dataset]

