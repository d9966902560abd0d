"""Every command line the README and docs/*.md show (`treeqa ...`, `python optimize.py ...`, in a
code block or in inline code) names a command that exists and only options that command has:
checked against typer's click tree, without running anything. A renamed or removed option fails
here instead of in a reader's shell."""

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from treeqa.cli import app, optimize_cmd

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
START = re.compile(r"(?:^|[\s`(;&|])((?:[\w.\-]*/)*treeqa(?=[ `]|$)|python3? optimize\.py(?=[ `]|$))")


def _blocks(text: str) -> tuple[list[str], list[str]]:
    """(lines of fenced code blocks, with continuations joined; inline code spans of prose)."""
    block_lines, spans, fenced, pending = [], [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            block_lines.append(pending)
            pending = ""
        else:
            spans.append(line)
    prose = "\n".join(spans)
    return block_lines, re.findall(r"`([^`\n]+)`", prose)


def command_lines(text: str) -> list[str]:
    """Every command line in a page: from `treeqa` (or `python optimize.py`) to the line's end, a
    shell comment, or the next shell operator."""
    block_lines, spans = _blocks(text)
    found = []
    for source in [*block_lines, *spans]:
        match = START.search(source)
        if not match or source.lstrip().startswith(("from ", "import ", ">>>")) or "treeqa." in match.group(1):
            continue
        rest = source[match.start(1):]
        rest = re.split(r"`|\s#\s|\s#$|\s(?:&&|\|\||\||;)\s|\)\"|\)$", rest)[0]
        found.append(rest.strip())
    return found


def _command(words: list[str]):
    """The click command the words name, the words left after it, and its name (typer carries its own
    click, so a group is whatever has subcommands)."""
    if "optimize.py" in words[0] or "optimize.py" in words[1:2]:
        skip = 2 if words[0].startswith("python") else 1
        return typer.main.get_command(_single(optimize_cmd)), words[skip:], "optimize.py"
    command, name = typer.main.get_command(app), "treeqa"
    rest = words[1:]
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        if rest[0].isupper():  # `treeqa COMMAND --help`: a placeholder for any command
            return command, [], f"{name} {rest[0]}"
        sub = command.commands.get(rest[0])
        assert sub is not None, f"`{name} {rest[0]}`: no such command (has {', '.join(sorted(command.commands))})"
        command, name, rest = sub, f"{name} {rest[0]}", rest[1:]
    return command, rest, name


def _single(function):
    single = typer.Typer()
    single.command()(function)
    return single


def problems_of(line: str) -> list[str]:
    """What in one command line the CLI does not have."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        return [f"{line}: not a shell line ({exc})"]
    try:
        command, rest, name = _command(words)
    except AssertionError as exc:
        return [f"{line}: {exc}"]
    known = {"--help"}
    for param in command.params:
        if not getattr(param, "hidden", False):  # a hidden option is an old name kept working, not taught
            known |= set(param.opts) | set(param.secondary_opts)
    out = []
    for word in (w.strip("[]") for w in rest):  # `[--tree]`: an optional option is still an option
        if word.startswith("-") and word not in ("-", "--") and not re.fullmatch(r"-\d[\d.]*", word):
            option = word.split("=", 1)[0]
            if option not in known:
                out.append(f"{line}: `{name}` has no option {option}")
    return out


def _all_lines() -> list[tuple[str, str]]:
    return [(page.relative_to(ROOT).as_posix(), line) for page in PAGES for line in command_lines(page.read_text())]


def test_the_docs_show_many_command_lines():
    lines = _all_lines()
    pages = {page for page, _ in lines}
    assert len(lines) > 50 and {"README.md", "docs/reproduce.md", "docs/cli.md"} <= pages


@pytest.mark.parametrize("page", [p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_command_line_in_the_docs_is_one_the_cli_takes(page):
    bad = [problem for where, line in _all_lines() if where == page for problem in problems_of(line)]
    assert not bad, "\n".join(bad)


def test_a_removed_option_or_command_is_caught():
    assert problems_of("treeqa evaluate --program tor --threads 4")
    assert problems_of("treeqa nosuch --n 3")
    assert problems_of("python optimize.py --program tor --nosuch")
    assert not problems_of("treeqa evaluate --program tor --dataset hotpotqa --n 30")
    assert not problems_of("python optimize.py --program tor --dataset hotpotqa")
    page = "x `treeqa view runs/a` y\n```\n# needs\ntreeqa ask \\\n  'q' --tree   # c\n```\n"
    assert sorted(" ".join(line.split()) for line in command_lines(page)) == ["treeqa ask 'q' --tree",
                                                                           "treeqa view runs/a"]
