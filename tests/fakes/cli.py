"""The `treeqa` command, run in this process as a user would type it."""

from __future__ import annotations


def run_cli(*args: str):
    """`treeqa ARGS...` through typer's CliRunner: its result (exit_code, output)."""
    from typer.testing import CliRunner

    from treeqa.cli import app

    return CliRunner().invoke(app, list(args))


def benchmark_script(name: str):
    """`benchmarks/NAME.py` loaded as a module (the scripts are not a package), registered under
    its own name so dataclasses and pickles find it."""
    import importlib.util
    import sys

    from treeqa.settings import PROJECT_ROOT

    spec = importlib.util.spec_from_file_location(f"{name}_script", PROJECT_ROOT / "benchmarks" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script
    spec.loader.exec_module(script)
    return script
