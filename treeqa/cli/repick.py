"""treeqa repick: a finished beam run's answers picked again from its recorded trees."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from treeqa.cli.common import app, fail
from treeqa.evaluation.repick import RepickError, repick_run
from treeqa.programs.beam_search import PICKS


@app.command("repick")
def repick_cmd(
    run: Annotated[Path, typer.Argument(help="A finished beam run: an evaluate folder or an optimize run's "
                                             "compiled side.")],
    out: Annotated[Path, typer.Argument(help="A new folder for the re-picked run.")],
    pick: Annotated[str, typer.Option(help=f"The pick to apply: {', '.join(PICKS)}.")] = "vote",
) -> None:
    """Pick a beam run's answers again from its recorded trees with another `pick`, with no LM call:
    `pick` never changes the search, so the new folder holds the run that pick would have made,
    and reads like any evaluate folder."""
    if pick not in PICKS:
        fail(f"--pick must be one of {', '.join(PICKS)}, not {pick!r}")
    command = shlex.join(["treeqa", "repick", str(run), str(out), "--pick", pick])
    try:
        done = repick_run(run, out, pick, command)
    except RepickError as exc:
        fail(exc)
    typer.echo(f"{done.records} records, {done.changed} answers changed; EM {done.em_from:.1f} -> "
               f"{done.em_to:.1f}; written to {out}")
