"""What the command line prints when it refuses something: the refusal in one line, not the whole
value or a traceback, before any LM call or folder; and what a model writes is printed so that it
cannot drive the terminal."""

import dspy
import pytest
import typer

from tests.fakes import run_cli, use_lm
from treeqa.cli import common as cli
from treeqa.cli import printable


def test_a_huge_value_in_an_error_is_cut(capsys):
    with pytest.raises(typer.Exit):
        cli.fail(ValueError("a setting of this program cannot be " + "x" * 3_000_000))
    err = capsys.readouterr().err
    assert len(err) < cli.MAX_ERROR_CHARS + 100
    assert "more characters cut" in err and err.startswith("error: a setting of this program")


def test_a_short_error_is_printed_whole(capsys):
    with pytest.raises(typer.Exit):
        cli.fail("no such compiled program")
    assert capsys.readouterr().err.strip() == "error: no such compiled program"


def test_a_malformed_spec_json_is_named_with_its_first_fault_cut_short(tmp_path):
    from treeqa.evaluation.runs import EvalSpec, claim_folder, read_spec

    spec_file = tmp_path / "spec.json"
    for text, fault in [("{not json", "Invalid JSON"), ('{"program": "' + "x" * 3_000_000 + '", "n": "many"}', "n: "),
                        ('[1, 2]', "Input should be"), (b"\xff\xfe", "Invalid JSON")]:
        spec_file.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(ValueError) as raised:
            read_spec(spec_file)
        message = str(raised.value)
        assert message.startswith(f"{spec_file} is not an evaluation spec (") and fault in message, message
        assert len(message) < 600
    with pytest.raises(ValueError, match="use another output folder"):
        claim_folder(tmp_path, EvalSpec(program="rta"))


def test_replay_names_a_malformed_spec_json(tmp_path):
    from treeqa.evaluation.replay import ReplayError, recorded_spec

    (tmp_path / "spec.json").write_text('{"n": -1}')  # no program
    with pytest.raises(ReplayError, match=r"spec.json is not an evaluation spec \(program: Field required\)"):
        recorded_spec(tmp_path)


# benchmarks/faults.md, first round #8: settings from the command line

@pytest.mark.parametrize(("args", "message"), [
    (["--program", "tor", "--param", "widths=5"], "widths: input should be an instance of sequence"),
    (["--program", "beam", "--param", "threshold=abc"], "threshold: input should be a valid number"),
    (["--program", "tor", "--param", "bogus=1"], "bogus: not a setting of tor"),
    (["--program", "beam", "--preset", "nosuch"], "unknown preset 'nosuch'"),
    (["--program", "rta", "--param", "k=2.5"], "k: input should be a valid integer"),
])
def test_8_bad_settings_are_one_clear_line_each(fixture_data, tmp_path, args, message):
    result = run_cli("evaluate", *args, "--out", str(tmp_path / "R"))
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "R").exists()


# benchmarks/faults.md, first round #9: ask

def test_9_ask_fails_when_every_call_fails(fixture_data, monkeypatch):
    dead = dspy.LM("local/dead", engine=type("Dead", (), {"complete": lambda self, r: (_ for _ in ()).throw(
        TimeoutError("slow")), "close": lambda self: None})(), cache=False, num_retries=0)
    use_lm(monkeypatch, dead)
    result = run_cli("ask", "What is the capital of Peru?")
    assert result.exit_code == 1 and "no answer: 1 LM call(s) failed" in result.output


@pytest.mark.parametrize(("question", "message"), [
    ("caf\udce9?", "not valid UTF-8"), ("x" * 2001, "at most 2,000"), ("   ", "question is empty")])
def test_9_bad_questions_are_refused_before_any_call(scripted, question, message):
    result = run_cli("ask", question)
    assert result.exit_code == 1 and message in result.output
    assert scripted._engine_spec.calls == []


# benchmarks/faults.md, second round #12: one-line errors, not tracebacks

@pytest.mark.parametrize("args", [["--queue", "-1"], ["--time-limit", "0"], ["--concurrency", "0"]])
def test_12_serve_options_out_of_range_are_one_line(args):
    result = run_cli("serve", "--program", "direct", *args)
    assert result.exit_code == 1 and result.output.startswith("error: --concurrency must be")


# benchmarks/faults.md, second round #13: options that cannot mean what they say

@pytest.mark.parametrize(("args", "message"), [
    (["--question-budget", "0"], "--question-budget must be a positive number"),
    (["--max-errors", "-1"], "--max-errors must be 0"),
    (["--n", "100000"], "--n 100000: hotpotqa dev has 2 questions"),
])
def test_13_options_out_of_range_are_refused_before_any_folder(scripted, tmp_path, args, message):
    result = run_cli("evaluate", "--program", "direct", "--out", str(tmp_path / "R"), *args)
    assert result.exit_code == 1 and message in result.output
    assert not (tmp_path / "R").exists()


# benchmarks/faults.md, second round #14: what a model writes cannot drive a terminal

def test_14_answers_lose_control_characters_and_are_capped():
    from treeqa.signatures.answer import MAX_ANSWER_CHARS, clean_answer

    assert clean_answer("\x1b[31mParis\x07\u202e") == "[31mParis"
    assert len(clean_answer("x" * 10_000)) == MAX_ANSWER_CHARS
    assert printable("a\x1bb\u202ec") == "a\\x1bb\\u202ec"
