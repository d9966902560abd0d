import json

import dspy
import pytest
from dspy.utils import DummyLM
from typer.testing import CliRunner

import treeqa.lm
from tests.fakes import use_lm
from treeqa.cli import app, parse_params
from treeqa.evaluation.runs import EvalSpec, run_evaluation
from treeqa.programs import PROGRAMS, BeamSearchQA, build_program, program_name, uses_retriever


def test_registry_builds_every_program_and_knows_who_retrieves():
    assert {"beam", "tor", "cor", "rta", "direct", "cot", "genread"} <= set(PROGRAMS)
    for name, cls in PROGRAMS.items():
        assert cls.name == name and uses_retriever(name) == cls.needs_retriever(cls.resolve_settings())
    for name in ("direct", "cot", "genread"):
        assert program_name(build_program(name)) == name
        assert not uses_retriever(name)
    for name in ("tor", "cor", "rta", "beam"):
        assert uses_retriever(name)
        with pytest.raises(ValueError):
            build_program(name)  # they need a retriever
    assert not uses_retriever("beam", {"evidence": "genread"})
    assert not uses_retriever("beam", preset="triviaqa")
    beam = build_program("beam", preset="webq")
    assert isinstance(beam, BeamSearchQA) and (beam.beam_size, beam.depth, beam.max_queries) == (3, 2, 3)
    with pytest.raises(ValueError, match="unknown program"):
        build_program("magic")
    with pytest.raises(ValueError, match="presets are for the beam"):
        build_program("direct", preset="nq")


def test_parse_params_reads_json_values():
    assert parse_params(["depth=2", "widths=[3, 2]", "expansion=mpc", "relevance_pruning=false"]) == {
        "depth": 2, "widths": [3, 2], "expansion": "mpc", "relevance_pruning": False}


def test_run_evaluation_writes_and_resumes(fixture_data, tmp_path, monkeypatch):
    lm = DummyLM({"Rigi": {"answer": "Lake Zurich"}, "Weggis": {"answer": "no"}})
    use_lm(monkeypatch, lm)
    spec = EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2)
    result = run_evaluation(spec, tmp_path / "run")
    assert result["summary"]["n"] == 2 and result["summary"]["em"] == 50.0
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["spec"]["program"] == "direct" and "dspy" in saved["versions"]
    lines = (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert "| direct | 2 | 50.0 [0.0, 100.0] |" in result["table"]
    assert saved["data"]["split"] == "dev" and "summary" in saved and saved["summary"]["em_ci"] == [0.0, 100.0]
    run_evaluation(spec, tmp_path / "run")  # nothing left to do: no new lines
    assert len((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()) == 2


def test_skip_is_part_of_the_spec_only_when_set():
    plain = EvalSpec(program="direct", n=2)
    assert "skip" not in plain.decisive()  # earlier runs keep their keys and folders
    skipped = EvalSpec(program="direct", n=2, skip=100)
    assert skipped.key() != plain.key() and "skip100" in str(skipped.default_out())


def test_a_folder_holds_one_spec(fixture_data, tmp_path, monkeypatch):
    lm = DummyLM({"Rigi": {"answer": "Lake Zurich"}, "Weggis": {"answer": "no"}})
    use_lm(monkeypatch, lm)
    run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "run")
    with pytest.raises(ValueError, match="another spec") as err:
        run_evaluation(EvalSpec(program="cot", dataset="hotpotqa", split="dev", n=2), tmp_path / "run")
    assert "program=direct" in str(err.value) and "program=cot" in str(err.value)
    assert json.loads((tmp_path / "run" / "spec.json").read_text())["program"] == "direct"  # left as it was
    # threads and the cache do not decide results: the same folder resumes
    run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2, cache=False), tmp_path / "run")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "file")


def test_evaluate_command_reports_bad_input(fixture_data, tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--program", "direct", "--dataset", "squad", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown dataset 'squad'" in result.output
    result = CliRunner().invoke(app, ["evaluate", "--program", "direct", "--param", "oops"])
    assert result.exit_code != 0 and "key=value" in result.output


def test_threads_run_questions_in_parallel_and_never_on_the_embedded_engine():
    from treeqa.evaluation.runs import split_threads
    from treeqa.lm import LlamaEngine

    class Fake:
        def create_chat_completion(self, **kw):
            raise AssertionError("not called")

    local = dspy.LM("local/x", engine=LlamaEngine(llama=Fake()))
    remote = treeqa.lm.get_lm("hosted_vllm/m", api_base="http://127.0.0.1:9/v1")
    assert split_threads("tor", 8, local) == (1, 1)
    assert split_threads("tor", 8, remote) == (1, 8)  # questions in parallel: they are independent
    assert split_threads("beam", 4, remote) == (1, 4)
    assert split_threads("rta", 4, remote) == (1, 4)
    assert split_threads("rta", 1, remote) == (1, 1)
