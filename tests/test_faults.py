"""Runs you can trust: each fault a new user met, reproduced with scripted LMs and fixture data.

The scenarios are numbered as in benchmarks/faults.md, which `benchmarks/faults.py` writes.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import dspy
import pytest
from typer.testing import CliRunner

import treeqa.lm
from tests.fakes import generic_lm, use_lm
from treeqa.cli import app
from treeqa.evaluation.loop import RunAborted
from treeqa.evaluation.records import read_records
from treeqa.evaluation.runs import EvalSpec, folder_lock, run_evaluation
from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledProgramError, load_program, save_compiled
from treeqa.settings import PROJECT_ROOT

ANSWERS = {"Rigi Railway company": "Lake Zurich", "Weggis": "yes"}


@pytest.fixture
def scripted(fixture_data, monkeypatch):
    lm = generic_lm(ANSWERS)
    use_lm(monkeypatch, lm)
    return lm


def _cli(*args):
    return CliRunner().invoke(app, list(args))


# 1. a folder holds one spec; failed questions are retried on request -----------------------

def test_1_a_folder_made_by_another_program_is_refused(scripted, tmp_path):
    assert _cli("evaluate", "--program", "direct", "--n", "2", "--out", str(tmp_path / "R")).exit_code == 0
    result = _cli("evaluate", "--program", "cot", "--n", "2", "--out", str(tmp_path / "R"))
    assert result.exit_code == 1 and "another spec" in result.output
    assert json.loads((tmp_path / "R" / "spec.json").read_text())["program"] == "direct"


def test_1_optimize_refuses_a_folder_of_another_optimizer(scripted, tmp_path):
    from treeqa.optimize import OptimizeSpec, run_optimize

    spec = OptimizeSpec(program="direct", dataset="hotpotqa", train=1, dev=1)
    run_optimize(spec, tmp_path / "O")
    with pytest.raises(ValueError, match="another spec"):
        run_optimize(spec.model_copy(update={"optimizer": "mipro"}), tmp_path / "O")


def test_1_questions_failed_while_the_endpoint_was_down_are_retried(fixture_data, monkeypatch, tmp_path):
    down = {"now": True}
    healthy = generic_lm(ANSWERS)

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


# 2. compiled.json cannot choose the LM; bad demos and settings are named ------------------

def _compiled(tmp_path, edit):
    path = save_compiled(build_program("direct"), tmp_path / "c.json", name="direct", dataset="hotpotqa",
                         retriever="dense")
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))
    return path


def test_2_a_compiled_file_cannot_choose_the_lm(tmp_path, caplog):
    path = _compiled(tmp_path, lambda s: s["answer"].update(lm={"model": "openai/gpt-4o-mini"}, forward="x"))
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
        load_program(_compiled(tmp_path, edit))


# 3. records torn by a kill -----------------------------------------------------------------

def test_3_a_torn_multibyte_character_and_a_line_without_id_are_skipped(scripted, tmp_path, caplog):
    out = tmp_path / "R"
    spec = EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2)
    run_evaluation(spec, out)
    preds = out / "predictions.jsonl"
    first = preds.read_bytes().splitlines()[0]
    preds.write_bytes(first + b"\n" + b'{"answer": "no id"}\n' + b'{"id": "x", "prediction": "Z\xc3')
    result = run_evaluation(spec, out)
    assert result["summary"]["n"] == 2
    assert "predictions.jsonl, line 2: skipped" in caplog.text and "predictions.jsonl, line 3: skipped" in caplog.text
    ids = [r["id"] for r in read_records(preds)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 2


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


# 4. gold answers that are numbers or normalise to nothing --------------------------------

def test_4_an_always_failing_lm_scores_zero_even_on_empty_golds(fixture_data, tmp_path, monkeypatch):
    lm = dspy.LM("local/dead", engine=type("Dead", (), {"complete": lambda self, r: (_ for _ in ()).throw(
        ConnectionError("down")), "close": lambda self: None})(), cache=False, num_retries=0)
    use_lm(monkeypatch, lm)
    data = tmp_path / "data" / "nq"
    data.mkdir(parents=True)
    (data / "NQ-open.test.jsonl").write_text('{"question": "q1", "answer": ["The"]}\n'
                                             '{"question": "q2", "answer": [1990]}\n'
                                             '{"question": "q3", "answer": ["x"]}\n')
    from treeqa.settings import get_settings

    monkeypatch.setenv("TREEQA_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    result = run_evaluation(EvalSpec(program="direct", dataset="nq", split="test", n=2), tmp_path / "R")
    assert result["summary"]["n"] == 2 and result["summary"]["em"] == 0.0  # "The" skipped, 1990 read as text


# 8. settings from the command line ---------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["--program", "tor", "--param", "widths=5"], "widths: input should be an instance of sequence"),
    (["--program", "beam", "--param", "threshold=abc"], "threshold: input should be a valid number"),
    (["--program", "tor", "--param", "bogus=1"], "bogus: not a setting of tor"),
    (["--program", "beam", "--preset", "nosuch"], "unknown preset 'nosuch'"),
    (["--program", "rta", "--param", "k=2.5"], "k: input should be a valid integer"),
])
def test_8_bad_settings_are_one_clear_line_each(fixture_data, tmp_path, args, message):
    result = _cli("evaluate", *args, "--out", str(tmp_path / "R"))
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "R").exists()


def test_8_booleans_parse_as_users_write_them():
    from treeqa.programs import validate_params

    for word, value in (("no", False), ("off", False), ("false", False), ("yes", True), ("true", True), ("1", True)):
        assert validate_params("tor", {"relevance_pruning": word}) == {"relevance_pruning": value}


def test_8_out_pointing_at_a_file_is_a_clear_error(scripted, tmp_path):
    (tmp_path / "file").write_text("x")
    result = _cli("evaluate", "--program", "direct", "--n", "1", "--out", str(tmp_path / "file"))
    assert result.exit_code == 1 and "is a file" in result.output


# 9. ask ------------------------------------------------------------------------------------

def test_9_ask_fails_when_every_call_fails(fixture_data, monkeypatch):
    dead = dspy.LM("local/dead", engine=type("Dead", (), {"complete": lambda self, r: (_ for _ in ()).throw(
        TimeoutError("slow")), "close": lambda self: None})(), cache=False, num_retries=0)
    use_lm(monkeypatch, dead)
    result = _cli("ask", "What is the capital of Peru?")
    assert result.exit_code == 1 and "no answer: 1 LM call(s) failed" in result.output


@pytest.mark.parametrize(("question", "message"), [
    ("caf\udce9?", "not valid UTF-8"), ("x" * 2001, "at most 2,000"), ("   ", "question is empty")])
def test_9_bad_questions_are_refused_before_any_call(scripted, question, message):
    result = _cli("ask", question)
    assert result.exit_code == 1 and message in result.output
    assert scripted._engine_spec.calls == []


# 10. names are checked before any path is made ----------------------------------------------

def test_10_an_unknown_dataset_creates_no_folder(fixture_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _cli("evaluate", "--program", "direct", "--dataset", "../../X")
    assert result.exit_code == 1 and "unknown dataset '../../X'" in result.output
    assert list(tmp_path.iterdir()) == []
    assert not (PROJECT_ROOT / "runs" / "X-dev-n30-s0").exists()


# 11. one evaluation per folder at a time -----------------------------------------------------

def test_11_a_second_evaluation_into_a_busy_folder_is_refused(scripted, tmp_path):
    (tmp_path / "R").mkdir()
    with folder_lock(tmp_path / "R"):
        result = _cli("evaluate", "--program", "direct", "--n", "1", "--out", str(tmp_path / "R"))
    assert result.exit_code == 1 and "another evaluation is writing" in result.output
    assert _cli("evaluate", "--program", "direct", "--n", "1", "--out", str(tmp_path / "R")).exit_code == 0


# 12. a dead endpoint stops the run; endpoint calls have a timeout ------------------------------

def test_12_a_dead_endpoint_stops_the_run_and_keeps_its_records(fixture_data, tmp_path, monkeypatch):
    dead = dspy.LM("local/dead", engine=type("Dead", (), {"complete": lambda self, r: (_ for _ in ()).throw(
        ConnectionError("refused")), "close": lambda self: None})(), cache=False, num_retries=0)
    use_lm(monkeypatch, dead)
    with pytest.raises(RunAborted, match="2 questions in a row"):
        run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "R", max_errors=2)
    assert len(read_records(tmp_path / "R" / "predictions.jsonl")) == 2


def test_12_endpoints_get_a_per_call_timeout(settings_env):
    settings_env(lm_timeout=7.5)
    assert treeqa.lm.get_lm("hosted_vllm/m", api_base="http://127.0.0.1:9/v1").kwargs["timeout"] == 7.5


def test_12_a_question_past_its_budget_is_a_recorded_failure_and_the_run_goes_on(fixture_data, tmp_path,
                                                                                  monkeypatch):
    import time

    from tests.fakes import ScriptedEngine, generic_responder

    respond = generic_responder(ANSWERS)

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
