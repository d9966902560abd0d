"""What a program is given at the door: a number setting is a number, never true or false
(`--param k=true` was taken as k=1), and a program called with no LM configured says so
instead of answering "" (every call recorded as a failure)."""

import dspy
import pytest

from treeqa.programs import build_program, resolve_program
from treeqa.programs.common import NoLMError


@pytest.mark.parametrize("name, params", [("rta", {"k": True}), ("beam", {"depth": False}),
                                          ("beam", {"threshold": True}), ("tor", {"widths": [5, True]})])
def test_9_booleans_are_refused_for_numeric_settings(name, params):
    with pytest.raises(ValueError, match="a number is needed, not true or false"):
        resolve_program(name, params, None)


def test_9_boolean_settings_still_take_booleans():
    assert resolve_program("beam", {"check_seeds": True}, None).settings["check_seeds"] is True


@pytest.mark.parametrize("name", ["direct", "cot", "genread"])
def test_9_a_program_called_with_no_lm_configured_raises_a_clear_error(name):
    program = build_program(name)
    with dspy.context(lm=None), pytest.raises(NoLMError, match="no LM is configured"):
        program(question="Which river flows through Basel?")
