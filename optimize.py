"""`python optimize.py --program tor --dataset hotpotqa`: the same command as `treeqa optimize`."""

import typer

from treeqa.cli import optimize_cmd

if __name__ == "__main__":
    typer.run(optimize_cmd)
