"""The command line means the same everywhere: a compiled program is evaluated on the questions
of the set it was compiled for unless told otherwise."""

import json

import pytest
from typer.testing import CliRunner

from tests.fakes import FakeRetriever, generic_lm, use_lm
from treeqa.cli import app, load_served
from treeqa.data import DEFAULT_DATASET
from treeqa.programs import build_program
from treeqa.programs.compiled import save_compiled
from treeqa.retrievers import DEFAULT_KIND


@pytest.fixture
def compiled_for_2wiki(fixture_data, monkeypatch, tmp_path):
    use_lm(monkeypatch, generic_lm({}, default_answer="yes"))
    return save_compiled(build_program("direct"), tmp_path / "c.json", name="direct", dataset="2wikimultihopqa",
                         retriever="dense")


def _evaluate(*args):
    return CliRunner().invoke(app, ["evaluate", *args, "--n", "1"])


def test_evaluate_compiled_takes_the_dataset_from_the_file(compiled_for_2wiki, tmp_path):
    result = _evaluate("--compiled", str(compiled_for_2wiki), "--out", str(tmp_path / "R"))
    assert result.exit_code == 0, result.output
    spec = json.loads((tmp_path / "R" / "spec.json").read_text())
    assert spec["dataset"] == "2wikimultihopqa" and spec["split"] == "dev"


def test_a_dataset_given_is_the_one_evaluated(compiled_for_2wiki, tmp_path):
    result = _evaluate("--compiled", str(compiled_for_2wiki), "--dataset", "hotpotqa", "--out", str(tmp_path / "R"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "R" / "spec.json").read_text())["dataset"] == "hotpotqa"


def test_without_a_compiled_file_the_default_dataset_is_hotpotqa(fixture_data, monkeypatch, tmp_path):
    use_lm(monkeypatch, generic_lm({}, default_answer="yes"))
    result = _evaluate("--program", "direct", "--out", str(tmp_path / "R"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "R" / "spec.json").read_text())["dataset"] == "hotpotqa"


def test_a_default_replaced_by_another_option_is_said(fixture_data, monkeypatch, tmp_path):
    """tor compiles on 100 train questions by default; another optimizer on 20, and says so."""
    use_lm(monkeypatch, generic_lm({}, default_answer="yes"))
    out = tmp_path / "O"
    other = CliRunner().invoke(app, ["optimize", "--program", "tor", "--optimizer", "bootstrap", "--plan",
                                     "--out", str(out)])
    assert "--train not given: 20 train questions, the size for --optimizer bootstrap" in other.output, other.output
    own = CliRunner().invoke(app, ["optimize", "--program", "tor", "--plan", "--out", str(tmp_path / "P")])
    assert "--train not given" not in own.output


def test_a_corpus_file_is_named_as_a_file_and_the_old_spelling_still_works(fixture_data, tmp_path):
    """--corpus is a corpus name everywhere; building one from a file is --corpus-file (the old
    --corpus FILE of `index build` still works, unlisted)."""
    import re

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": "a", "contents": "Lake Zurich lies in Switzerland."}\n')
    help_text = re.sub(r"\x1b\[[0-9;]*m", "", CliRunner().invoke(app, ["index", "build", "--help"]).output)
    listed = re.findall(r"^│\s+(--[\w-]+)", help_text, re.M)  # the options the help lists, one a row
    assert "--corpus-file" in listed and "--corpus" not in listed
    missing = CliRunner().invoke(app, ["index", "build", "--corpus-file", str(corpus)])
    assert missing.exit_code == 1 and "--corpus-file needs --name NAME" in missing.output
    old = CliRunner().invoke(app, ["index", "build", "--corpus", str(corpus)])
    assert old.exit_code == 1 and "--corpus-file needs --name NAME" in old.output


@pytest.mark.parametrize("command", [["evaluate"], ["compare"], ["optimize"]])
def test_the_sample_size_is_n_on_every_command(command):
    import re

    help_text = re.sub(r"\x1b\[[0-9;]*m", "", CliRunner().invoke(app, [*command, "--help"]).output)
    assert re.search(r"^│\s+--n\b", help_text, re.M), help_text


@pytest.mark.parametrize("command", [["evaluate"], ["compare"], ["optimize"], ["serve"]])
def test_questions_at_once_is_concurrency_on_every_command(command):
    import re

    help_text = re.sub(r"\x1b\[[0-9;]*m", "", CliRunner().invoke(app, [*command, "--help"]).output)
    listed = re.findall(r"^│\s+(--[\w-]+)", help_text, re.M)
    assert "--concurrency" in listed and "--threads" not in listed


def test_the_old_threads_spelling_still_sets_the_concurrency(fixture_data, monkeypatch, tmp_path):
    use_lm(monkeypatch, generic_lm({}, default_answer="yes"))
    for flag, out in (("--threads", "T"), ("--concurrency", "C")):
        result = _evaluate("--program", "direct", flag, "2", "--out", str(tmp_path / out))
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / out / "spec.json").read_text())["threads"] == 2


def test_ask_and_serve_take_their_program_from_the_same_options(fixture_data, monkeypatch):
    """Both answer with a compiled file or a zero-shot program searching a dataset's corpus: the
    same options, and the same corpus searched when none is named."""
    from typer.main import get_command

    commands = get_command(app).commands
    ask, serve = ({p.name: p for p in commands[name].params} for name in ("ask", "serve"))
    for name in ("compiled", "program", "dataset", "retriever", "corpus"):
        assert ask[name].help == serve[name].help, name
    assert ask["dataset"].default == serve["dataset"].default == DEFAULT_DATASET
    searched = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever",
                        lambda dataset, kind, corpus=None: searched.append((dataset, kind, corpus)) or FakeRetriever())
    use_lm(monkeypatch, generic_lm({}, default_answer="Lima"))
    result = CliRunner().invoke(app, ["ask", "What is the capital of Peru?", "--program", "rta"])
    assert result.exit_code == 0 and "Lima" in result.output, result.output
    assert load_served(None, "rta", DEFAULT_DATASET, None, "local", None).info["dataset"] == DEFAULT_DATASET
    assert searched == [(DEFAULT_DATASET, DEFAULT_KIND, None)] * 2
