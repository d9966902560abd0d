import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import dspy
import pytest
from dspy.utils import DummyLM
from typer.testing import CliRunner

import treeqa.lm
from tests.fakes import FIXTURE_ANSWERS, ScriptedEngine, generic_lm, generic_responder, run_cli, use_lm
from treeqa.cli import app, parse_params
from treeqa.evaluation.loop import RunAborted
from treeqa.evaluation.records import read_records
from treeqa.evaluation.runs import EvalSpec, run_evaluation
from treeqa.programs import PROGRAMS, BeamSearchQA, build_program, program_name, uses_retriever
from treeqa.settings import PROJECT_ROOT


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


# benchmarks/faults.md, first round #1: a folder holds one spec; failed questions are retried on request

def test_1_questions_failed_while_the_endpoint_was_down_are_retried(fixture_data, monkeypatch, tmp_path):
    down = {"now": True}
    healthy = generic_lm(FIXTURE_ANSWERS)

    class Flaky:
        def complete(self, request):
            if down["now"]:
                raise ConnectionError("endpoint down")
            return healthy._engine_spec.complete(request)

        def close(self):
            pass

    lm = dspy.LM("local/flaky", engine=Flaky(), cache=False, num_retries=0)
    use_lm(monkeypatch, lm)
    spec = EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2)
    first = run_evaluation(spec, tmp_path / "R")
    assert first["summary"]["em"] == 0.0 and first["summary"]["failed_calls"] == 2
    down["now"] = False
    assert run_evaluation(spec, tmp_path / "R")["summary"]["em"] == 0.0  # a plain resume keeps them
    again = run_evaluation(spec, tmp_path / "R", retry_failed=True)
    assert again["summary"]["em"] == 100.0 and again["summary"]["failed_calls"] == 0
    assert len((tmp_path / "R" / "predictions.jsonl").read_text().splitlines()) == 2


# benchmarks/faults.md, first round #3: records torn by a kill

def test_3_kill_9_mid_run_loses_and_duplicates_nothing(fixture_data, tmp_path):
    """A real subprocess evaluation killed with SIGKILL at several points, then resumed."""
    out = tmp_path / "preds.jsonl"
    script = tmp_path / "slow_eval.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        import dspy
        from dspy.utils import DummyLM
        from treeqa.evaluation.loop import evaluate

        class Slow(dspy.Module):
            def forward(self, question):
                time.sleep(0.05)
                return dspy.Prediction(answer="Zürich " * 2000, failures=[])  # long, multi-byte records

        examples = [dspy.Example(id=f"q{{i}}", question=f"q{{i}}", answers=["Zürich"]).with_inputs("question")
                    for i in range(120)]
        evaluate(Slow(), examples, out_path={str(out)!r}, progress=False)
    """))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    for target in (5, 40, 80):  # kill once this many records are on disk: always mid-run
        proc = subprocess.Popen([sys.executable, str(script)], env=env)
        deadline = time.monotonic() + 120
        while (not out.exists() or out.read_bytes().count(b"\n") < target) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ids = [r["id"] for r in read_records(out)]
        assert len(ids) == len(set(ids)) and target <= len(ids) < 120
    finished = subprocess.run([sys.executable, str(script)], env=env, timeout=300)
    assert finished.returncode == 0
    records = read_records(out)
    assert sorted(r["id"] for r in records) == sorted(f"q{i}" for i in range(120))
    lines = [line for line in out.read_bytes().splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line)["id"])
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass  # a torn line from a kill: skipped on read
    assert len(parsed) == len(set(parsed)) == 120  # every question exactly once


# benchmarks/faults.md, first round #8: settings from the command line

def test_8_booleans_parse_as_users_write_them():
    from treeqa.programs import validate_params

    for word, value in (("no", False), ("off", False), ("false", False), ("yes", True), ("true", True), ("1", True)):
        assert validate_params("tor", {"relevance_pruning": word}) == {"relevance_pruning": value}


# benchmarks/faults.md, first round #12: a dead endpoint stops the run; endpoint calls have a timeout

def test_12_a_dead_endpoint_stops_the_run_and_keeps_its_records(fixture_data, tmp_path, monkeypatch):
    dead = dspy.LM("local/dead", engine=type("Dead", (), {"complete": lambda self, r: (_ for _ in ()).throw(
        ConnectionError("refused")), "close": lambda self: None})(), cache=False, num_retries=0)
    use_lm(monkeypatch, dead)
    with pytest.raises(RunAborted, match="2 questions in a row"):
        run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "R", max_errors=2)
    assert len(read_records(tmp_path / "R" / "predictions.jsonl")) == 2


def test_12_a_question_past_its_budget_is_a_recorded_failure_and_the_run_goes_on(fixture_data, tmp_path,
                                                                                  monkeypatch):
    respond = generic_responder(FIXTURE_ANSWERS)

    def slow_on_rigi(call):
        if "Rigi" in call.messages[-1]["content"]:
            time.sleep(1.5)
        return respond(call)

    lm = dspy.LM("local/slow", engine=ScriptedEngine(slow_on_rigi), cache=False, num_retries=0)
    use_lm(monkeypatch, lm)
    spec = EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2)
    result = run_evaluation(spec, tmp_path / "R", question_budget=0.5)
    by_question = {r["question"]: r for r in result["records"]}
    slow = next(r for q, r in by_question.items() if "Rigi" in q)
    assert slow["error"].startswith("TimeoutError: the question ran past its 0.5 s budget") and slow["em"] == 0
    assert all(not r.get("error") for q, r in by_question.items() if "Rigi" not in q)  # the run went on
    again = run_evaluation(spec, tmp_path / "R", retry_failed=True, question_budget=10)
    assert again["summary"]["errors"] == 0 and again["summary"]["em"] == 100.0


# benchmarks/faults.md, second round #8 (filed there): compare pairs each program with rta

def test_8_compare_pairs_each_program_with_rta_on_the_same_questions(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr("treeqa.evaluation.runs.RUNS_DIR", tmp_path / "runs")
    result = run_cli("compare", "--programs", "direct,iterretgen,rta", "--n", "2", "--retriever", "bm25", "--no-cache")
    assert result.exit_code == 0, result.output
    table = result.output.split("Paired on the same questions")[1]
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if " vs rta " in line}
    assert "where both saw all gold" in table and set(rows) == {"direct vs rta", "iterretgen vs rta"}
    # the reading column: both searches found every gold paragraph of both questions (BM25 over the
    # fixture corpus) and both answered them, so no question is one where only iterretgen's search
    # had them all; direct sees no passages, so it has neither column
    assert rows["iterretgen vs rta"].endswith("| 100.0 / 100.0 (2) [+0.00, +0.00], p=1: no significant difference "
                                              "| – |")
    assert rows["direct vs rta"].endswith("| – | – |")
    assert len(list((tmp_path / "runs").rglob("predictions.jsonl"))) == 3  # one folder a program
    typo = run_cli("compare", "--programs", "direct,rtaa", "--n", "2", "--no-cache")
    assert typo.exit_code == 1 and "unknown program 'rtaa'" in typo.output
    assert "direct on hotpotqa" not in typo.output  # refused before the first program ran
    unknown = run_cli("compare", "--programs", "direct,rta", "--corpus", "nowhere", "--n", "2", "--no-cache")
    assert unknown.exit_code == 1 and "nowhere" in unknown.output and "direct on hotpotqa" not in unknown.output
    assert len(list((tmp_path / "runs").rglob("predictions.jsonl"))) == 3
    assert run_cli("compare", "--programs", "direct,rta", "--against", "cot").exit_code == 1
