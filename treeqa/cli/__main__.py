"""`python -m treeqa.cli`: the same as the `treeqa` command."""

from treeqa.cli import main

main()
