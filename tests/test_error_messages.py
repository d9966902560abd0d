"""What the command line prints when it refuses something: the refusal, not the whole value."""

import pytest
import typer

from treeqa.cli import common as cli


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
