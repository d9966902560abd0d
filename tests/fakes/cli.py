"""The `treeqa` command, run in this process as a user would type it."""

from __future__ import annotations


def run_cli(*args: str):
    """`treeqa ARGS...` through typer's CliRunner: its result (exit_code, output)."""
    from typer.testing import CliRunner

    from treeqa.cli import app

    return CliRunner().invoke(app, list(args))
