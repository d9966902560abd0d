"""A compiled file is untrusted input: it cannot choose the LM, and bad demos, settings, numbers
or sizes are refused, naming the file and what is wrong (benchmarks/faults.md, first round #2,
second round #3 and #4)."""

import json

import pytest

from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledProgramError, load_program, save_compiled


def _edited_state(tmp_path, edit):
    """A compiled direct program whose JSON state `edit` changed in place."""
    path = save_compiled(build_program("direct"), tmp_path / "c.json", name="direct", dataset="hotpotqa",
                         retriever="dense")
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))
    return path


def _edited_text(tmp_path, edit, name="direct"):
    """A compiled program whose file text `edit` rewrote (text that need not be valid JSON)."""
    path = save_compiled(build_program(name), tmp_path / "c.json", name=name, dataset="hotpotqa", retriever="dense")
    text = edit(path.read_text())
    path.write_text(text)
    return path


# benchmarks/faults.md, first round #2: compiled.json cannot choose the LM; bad demos and settings are named

def test_2_a_compiled_file_cannot_choose_the_lm(tmp_path, caplog):
    path = _edited_state(tmp_path, lambda s: s["answer"].update(lm={"model": "openai/gpt-4o-mini"}, forward="x"))
    program = load_program(path)
    assert program.answer.lm is None and "forward" not in vars(program.answer)
    assert "ignored forward, lm" in caplog.text


@pytest.mark.parametrize(("edit", "match"), [
    (lambda s: s["answer"].update(demos=[{"question": "q", "answer": "a", "shell": "rm -rf /"}]),
     "signature lacks: shell"),
    (lambda s: s["answer"].update(demos="not a list"), "'demos' must be a list"),
    (lambda s: s["answer"].update(demos=[["q", "a"]]), "a demo must be an object"),
    (lambda s: s["answer"]["signature"].update(instructions=42), "'instructions' as text"),
    (lambda s: s["treeqa"].update(settings={"k": "many"}), "not a setting of direct"),
])
def test_2_bad_demos_and_settings_in_a_compiled_file_are_named(tmp_path, edit, match):
    with pytest.raises((CompiledProgramError, ValueError), match=match):
        load_program(_edited_state(tmp_path, edit))


# benchmarks/faults.md, second round #3: compiled files: finite numbers, bounded size

@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace('"format": 2', '"format": 2, "x": NaN'), "NaN is not a finite number"),
    (lambda t: t.replace('"format": 2', '"format": 2, "x": -Infinity'), "Infinity is not a finite number"),
    (lambda t: json.dumps({**json.loads(t), "answer": {**json.loads(t)["answer"], "demos": [
        {"question": "q", "answer": "a"}] * 200}}), "200 demos; at most 32"),
    (lambda t: json.dumps({**json.loads(t), "answer": {**json.loads(t)["answer"], "demos": [
        {"question": "q" * 30_000, "answer": "a"}]}}), "a demo over 20,000 characters"),
    (lambda t: t.replace('"format": 2', '"format": 2, "x": ' + "[" * 200_000 + "]" * 200_000),
     "nested too deeply"),
    (lambda t: t + " " * (5 << 20), "at most 4,194,304"),
])
def test_3_4_bad_numbers_and_unbounded_files_are_refused(tmp_path, edit, match):
    with pytest.raises(CompiledProgramError, match=match):
        load_program(_edited_text(tmp_path, edit))
