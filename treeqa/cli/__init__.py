"""The `treeqa` command line, one module per group of commands: setup (model, index), data (list,
get), runs (programs, evaluate, replay, compare), answer (ask, serve, view), optimize, repick, train
(the `train` group: reads, reasons, lora, attach); common holds the app and what the commands share."""

from treeqa.cli import (  # noqa: F401 (each registers its commands on `app`)
    answer,
    data,
    optimize,
    repick,
    runs,
    setup,
    train,
)
from treeqa.cli.answer import load_served
from treeqa.cli.common import app, default_split, load_searching, parse_params, printable
from treeqa.cli.optimize import optimize_cmd


def main() -> None:
    app()


__all__ = ["app", "default_split", "load_searching", "load_served", "main", "optimize_cmd", "parse_params",
           "printable"]
