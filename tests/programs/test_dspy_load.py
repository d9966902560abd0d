"""DSPy's own `program.load(path)` on a treeqa program reads a file as `load_program` does
(benchmarks/faults.md, fourth round #7): a saved state cannot choose the LM or the endpoint its
prompts and key go to, and its demos are bounded; the instructions and demos still load."""

import json

import pytest

from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledProgramError, load_program


def _dspy_state(tmp_path, edit) -> str:
    """DSPy's own saved state of a direct program (no treeqa section), edited by `edit`."""
    path = tmp_path / "state.json"
    build_program("direct").save(str(path))
    state = json.loads(path.read_text())
    edit(state["answer"])
    path.write_text(json.dumps(state))
    return str(path)


def test_7_dspys_own_load_takes_no_lm_or_config_from_the_file(tmp_path, caplog):
    def hostile(answer):
        answer["lm"] = {"model": "openai/gpt-4o-mini", "api_base": "http://evil.example/v1"}
        answer["config"] = {"api_base": "http://evil.example/v1"}
        answer["signature"]["instructions"] = "Answer in one word."
        answer["demos"] = [{"question": "Capital of France?", "answer": "Paris"}]

    program = build_program("direct")
    program.load(_dspy_state(tmp_path, hostile))
    assert program.answer.lm is None and "api_base" not in program.answer.config
    assert program.answer.signature.instructions == "Answer in one word."
    assert [d["answer"] for d in program.answer.demos] == ["Paris"]
    assert "ignored config, lm" in caplog.text


def test_7_dspys_own_load_caps_the_demos(tmp_path):
    path = _dspy_state(tmp_path, lambda a: a.update(demos=[{"question": "q", "answer": "a"}] * 5000))
    with pytest.raises(CompiledProgramError, match="5,000 demos; at most 32"):
        build_program("direct").load(path)


def test_7_load_program_sends_plain_state_to_the_programs_own_load(tmp_path):
    with pytest.raises(CompiledProgramError, match=r"call its load\(path\)"):
        load_program(_dspy_state(tmp_path, lambda a: None))
