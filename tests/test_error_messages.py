"""What the command line prints when it refuses something: the refusal, not the whole value."""

import pytest
import typer

from treeqa import cli


def test_a_huge_value_in_an_error_is_cut(capsys):
    with pytest.raises(typer.Exit):
        cli._fail(ValueError("a setting of this program cannot be " + "x" * 3_000_000))
    err = capsys.readouterr().err
    assert len(err) < cli.MAX_ERROR_CHARS + 100
    assert "more characters cut" in err and err.startswith("error: a setting of this program")


def test_a_short_error_is_printed_whole(capsys):
    with pytest.raises(typer.Exit):
        cli._fail("no such compiled program")
    assert capsys.readouterr().err.strip() == "error: no such compiled program"
