"""treeqa data list / get: the benchmark files, where the loaders find them, and fetching the
official ones (the only command that uses the network)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from treeqa.cli.common import app, fail
from treeqa.data import DataError
from treeqa.data.download import get, is_present
from treeqa.data.folders import data_roots
from treeqa.data.sources import SOURCES

data_app = typer.Typer(help="Benchmark files: list them, fetch the official ones.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("list")
def data_list() -> None:
    """Each dataset's source, licence, size and whether the loaders find its files."""
    typer.echo(f"searched in order: {', '.join(str(root) for root in data_roots())}")
    for source in SOURCES.values():
        state = "found" if is_present(source) else "missing"
        typer.echo(f"{source.name:16} {state:8} {source.licence}; {source.size}; {source.homepage}")


@data_app.command("get")
def data_get(
    name: Annotated[str, typer.Argument(help="A dataset (or source) `treeqa data list` names.")],
    from_folder: Annotated[Path | None, typer.Option("--from", help="Read the downloaded file(s) from this folder "
                                                                    "instead of the network (for sources such as "
                                                                    "Google Drive that a program cannot fetch).")]
    = None,
    if_missing: Annotated[bool, typer.Option(help="Do nothing when the loaders already find the dataset.")] = False,
) -> None:
    """Download a dataset's official files (resumable, sha256-checked) into the user data folder."""
    try:
        installed = get(name, from_folder=from_folder, if_missing=if_missing)
    except DataError as exc:
        fail(exc)
    if not installed:
        typer.echo(f"{name}: already found (treeqa data list shows where)")
    for path in installed:
        typer.echo(f"{name}: {path}")
