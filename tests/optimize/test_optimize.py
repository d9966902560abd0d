import json

import dspy
import pytest
from typer.testing import CliRunner

from tests.fakes import generic_lm, use_lm
from treeqa.cli import app
from treeqa.optimize import (
    OptimizeSpec,
    changed_instructions,
    gepa_split,
    max_calls_per_question,
    optimizer_names,
    plan,
    preparers,
    run_optimize,
    splits_for,
)
from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledProgramError, load_program, read_recipe, save_compiled
from treeqa.teleprompt import compilers
from treeqa.teleprompt.metrics import em_feedback_metric, em_metric

# fixture questions: dev "Rigi Railway company" -> Lake Zurich, "Weggis" -> yes; train "cog railway" -> 1871
ANSWERS = {"Rigi Railway company": "Lake Zurich", "cog railway": "1871", "Which mountain": "Mount Rigi", "Weggis": "no"}


@pytest.fixture
def scripted(fixture_data, monkeypatch):
    lm = generic_lm(ANSWERS)
    use_lm(monkeypatch, lm)
    return lm


def _spec(**kw):
    return OptimizeSpec(**{"program": "direct", "dataset": "hotpotqa", "train": 1, "dev": 2, **kw})


def test_metrics():
    ex = dspy.Example(question="q", answers=["Paris"])
    good, bad = dspy.Prediction(answer="paris"), dspy.Prediction(answer="Lyon")
    assert em_metric(ex, good) == 1.0 and em_metric(ex, bad) == 0.0
    assert em_metric(ex, good, trace=[]) is True and em_metric(ex, bad, trace=[]) is False
    fb = em_feedback_metric(ex, bad)
    assert fb.score == 0.0 and "'Paris'" in fb.feedback and "'Lyon'" in fb.feedback


def test_splits():
    assert splits_for("hotpotqa") == ("train", "dev")
    assert splits_for("nq") == ("dev", "test")
    assert splits_for("triviaqa") == ("dev", "test")
    assert splits_for("webq") == ("train", "test")


def test_run_writes_reports_and_resumes(scripted, tmp_path, capsys):
    out = tmp_path / "run"
    result = run_optimize(_spec(), out)
    for name in ("compiled.json", "report.json", "report.md", "zero-shot/predictions.jsonl",
                 "compiled/predictions.jsonl", "spec.json"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["zero_shot"]["n"] == 2 and report["compiled"]["n"] == 2
    assert report["zero_shot"]["em"] == 50.0  # Lake Zurich right, "no" for a yes question wrong
    assert report["compile"]["demos"] == {"answer": 1}  # the one train question bootstrapped
    assert report["compile"]["instructions_changed"] == []  # bootstrap tunes demos only
    assert "| direct zero-shot |" in result["table"] and "| direct compiled (bootstrap) |" in result["table"]
    calls = len(scripted._engine_spec.calls)

    again = run_optimize(_spec(), out)  # everything is done: no LM call at all
    assert len(scripted._engine_spec.calls) == calls
    assert again["report"]["compiled"] == report["compiled"]


def test_compiled_program_reloads_with_the_same_prompts(scripted, tmp_path):
    out = tmp_path / "run"
    run_optimize(_spec(), out)
    program = load_program(out / "compiled.json", expect="direct")
    assert len(program.answer.demos) == 1
    adapter = dspy.ChatAdapter()
    state = json.loads((out / "compiled.json").read_text())
    original = build_program("direct")
    original.load_state(state)
    messages = [adapter.format(p.signature, p.demos, {"question": "Who?"}) for p in (program.answer, original.answer)]
    assert messages[0] == messages[1]
    assert any("cog railway" in m["content"] for m in messages[0])  # the demo is in the prompt


def test_compiled_file_errors(scripted, tmp_path):
    out = tmp_path / "run"
    run_optimize(_spec(), out)
    with pytest.raises(CompiledProgramError, match="holds a compiled 'direct' program, not 'tor'"):
        load_program(out / "compiled.json", expect="tor")
    with pytest.raises(CompiledProgramError, match="pickles are never read"):
        load_program(tmp_path / "program.pkl")
    plain = tmp_path / "plain.json"
    build_program("direct").save(str(plain))
    with pytest.raises(CompiledProgramError, match="not a treeqa compiled program"):
        read_recipe(plain)
    with pytest.raises(CompiledProgramError, match="no such compiled program"):
        load_program(tmp_path / "missing.json")


def test_save_compiled_refuses_other_formats(tmp_path):
    with pytest.raises(CompiledProgramError, match=".json"):
        save_compiled(build_program("direct"), tmp_path / "x.pkl", name="direct", dataset="hotpotqa", retriever="dense")


@pytest.mark.parametrize("optimizer", [o for o in optimizer_names()
                                       if o not in ("path-judge", "query", "judge", "finetune", "better-together",
                                                    "trained-reader", "released-settings")])
# ToR/CoR only, with log-probabilities: path-judge in test_path_judge, query in test_query_writer, judge in test_judge;
# finetune and better-together train weights (the embedded provider): test_finetune; trained-reader:
# test_trained_reader; released-settings (ToR's record only): test_released_settings
def test_every_optimizer_runs_on_a_tiny_setting(scripted, tmp_path, optimizer):
    out = tmp_path / optimizer
    program = {"program": "rta", "retriever": "bm25"} if optimizer == "settings" else {}  # direct has none to tune
    run_optimize(_spec(optimizer=optimizer, train=2, candidates=2, trials=1, metric_calls=4, max_demos=1, **program),
                 out)
    recipe, _ = read_recipe(out / "compiled.json")
    assert recipe["compile"]["optimizer"] == optimizer
    assert json.loads((out / "report.json").read_text())["compiled"]["n"] == 2


@pytest.mark.parametrize("optimizer", [o for o in optimizer_names() if o not in preparers()
                                       and not compilers()[o].weights and o not in ("query", "judge")
                                       and o != "better-together"])
def test_every_em_teleprompter_compiles_what_a_preparer_prepared(scripted, tmp_path, optimizer):
    """`annotated+X`: the preparer marks its program compiled, as DSPy does, and DSPy's
    bootstrapping teleprompters (bootstrap, random-search, mipro) refused it as a student."""
    out = tmp_path / optimizer
    run_optimize(_spec(program="rta", retriever="bm25", optimizer=f"annotated+{optimizer}", train=2, candidates=2,
                       trials=1, metric_calls=4, max_demos=1), out)
    recipe, _ = read_recipe(out / "compiled.json")
    assert recipe["compile"]["optimizer"] == f"annotated+{optimizer}"
    assert json.loads((out / "report.json").read_text())["compiled"]["n"] == 2


def test_changed_instructions_names_rewritten_predictors():
    before = build_program("direct")
    after = before.deepcopy()
    assert changed_instructions(before, after) == []
    after.answer.signature = after.answer.signature.with_instructions("Answer in one word.")
    assert changed_instructions(before, after) == ["answer"]


def test_gepa_holds_out_part_of_train():
    train, val = gepa_split(list(range(20)))
    assert train == list(range(12)) and val == list(range(12, 20))
    assert gepa_split([1, 2]) == ([1], [2])
    with pytest.raises(ValueError, match="at least 2"):
        gepa_split([1])


def test_no_cache_reaches_the_evaluations_only():
    cached, uncached = _spec(), _spec(cache=False)
    assert cached.eval_spec().cache is True and uncached.eval_spec().cache is False
    assert cached.default_out() == uncached.default_out()  # same results, same folder


def test_plan_counts_calls_without_making_any(scripted, tmp_path):
    result = run_optimize(_spec(program="direct", dev=30, train=20), tmp_path / "p", plan_only=True)
    assert result["plan"] == {"calls_per_question_max": 1, "zero_shot_max": 30, "compile_max": 20,
                              "compiled_calls_per_question_max": 1, "compiled_max": 30}
    assert scripted._engine_spec.calls == []
    assert not (tmp_path / "p").exists()
    replayed = run_optimize(_spec(program="tor", dev=30, train=20, zero_shot=False, replay_from="R"),
                            tmp_path / "p", plan_only=True)["plan"]
    assert (replayed["zero_shot_max"], replayed["compiled_max"]) == (0, 30)  # one reader call a question


def test_plan_bounds_the_compiled_side_with_what_the_compile_sets(scripted, tmp_path):
    """ToR's default compile (judge, released linked search, trained reader) writes a program
    that asks the reader alone; the zero-shot side keeps the paper's 86 calls. Without the
    released search (--reader none) the judge still saves the reviews, not MPC's completions."""
    default = run_optimize(_spec(program="tor", dev=10, train=None, optimizer=None), tmp_path / "d",
                           plan_only=True)["plan"]
    assert default["calls_per_question_max"] == 5 + 15 + 45 + 5 + 15 + 1
    assert (default["compiled_calls_per_question_max"], default["compiled_max"]) == (1, 10)
    paper = run_optimize(_spec(program="tor", dev=10, train=None, optimizer=None, reader="none"), tmp_path / "n",
                         plan_only=True)["plan"]
    assert paper["compiled_calls_per_question_max"] == 5 + 15 + 45 + 5 + 15 + 1  # fusion=evidence: reviews asked


def test_call_bounds_follow_the_algorithms():
    from tests.fakes import FakeRetriever

    retriever = FakeRetriever()
    beam = build_program("beam", retriever, preset="nq")  # B=2 D=2 K=2, retrieval
    assert max_calls_per_question(beam) == 5 + 2 * 2 * (1 + 2 * 3)
    tor = build_program("tor", retriever)  # widths 5,3,3: 65 reviews, 20 MPC, 1 fusion
    assert max_calls_per_question(tor) == 65 + 20 + 1
    assert max_calls_per_question(build_program("tor", retriever, expansion="cot")) == 66
    assert max_calls_per_question(build_program("genread")) == 2


def test_optimize_command_and_bad_input(scripted, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["optimize", "--program", "direct", "--train", "1", "--dev", "2",
                                 "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    assert "| direct compiled (bootstrap) |" in result.output
    result = runner.invoke(app, ["ask", "Which lake borders the city where the Rigi Railway company is headquartered?",
                                 "--compiled", str(tmp_path / "cli" / "compiled.json")])
    assert result.exit_code == 0 and result.output.strip() == "Lake Zurich"
    result = runner.invoke(app, ["optimize", "--optimizer", "magic", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1 and "unknown optimizer 'magic'" in result.output
    result = runner.invoke(app, ["ask", "  "])
    assert result.exit_code == 1 and "question is empty" in result.output


def test_evaluate_command_runs_a_compiled_program(scripted, tmp_path):
    run_optimize(_spec(), tmp_path / "run")
    runner = CliRunner()
    compiled = str(tmp_path / "run" / "compiled.json")
    result = runner.invoke(app, ["evaluate", "--compiled", compiled, "--n", "2", "--out", str(tmp_path / "ev")])
    assert result.exit_code == 0, result.output
    assert "| direct | 2 |" in result.output
    spec = json.loads((tmp_path / "ev" / "spec.json").read_text())
    assert spec["program"] == "direct" and spec["params"]["_compiled"].endswith("compiled.json")
    result = runner.invoke(app, ["evaluate", "--program", "tor", "--compiled", compiled])
    assert result.exit_code == 1 and "holds a compiled 'direct' program, not 'tor'" in result.output


def test_a_compiled_file_inside_the_working_folder_is_recorded_relative_to_it(scripted, tmp_path, monkeypatch):
    """So a run's records name a file another checkout has at the same place."""
    run_optimize(_spec(), tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--compiled", str(tmp_path / "run" / "compiled.json"), "--n", "1",
                                      "--out", str(tmp_path / "ev")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "ev" / "spec.json").read_text())["params"]["_compiled"] == "run/compiled.json"


def test_a_compiled_run_is_keyed_by_the_file_s_content_not_its_folder(scripted, tmp_path):
    """A checkout in another folder (or a copy of the file) resumes the run; a changed file is
    another run; a spec written before the hash keeps its key (its path)."""
    import shutil

    from treeqa.evaluation.runs import EvalSpec

    run_optimize(_spec(), tmp_path / "run")
    runner = CliRunner()
    ev = str(tmp_path / "ev")
    first = runner.invoke(app, ["evaluate", "--compiled", str(tmp_path / "run" / "compiled.json"), "--n", "1",
                                "--out", ev])
    assert first.exit_code == 0, first.output
    moved = tmp_path / "elsewhere" / "compiled.json"
    moved.parent.mkdir()
    shutil.copy(tmp_path / "run" / "compiled.json", moved)
    resumed = runner.invoke(app, ["evaluate", "--compiled", str(moved), "--n", "1", "--out", ev])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((tmp_path / "ev" / "spec.json").read_text())["params"]["_compiled"] == str(moved.resolve())
    moved.write_text(moved.read_text().replace('"program": "direct"', '"program": "direct" ', 1))
    changed = runner.invoke(app, ["evaluate", "--compiled", str(moved), "--n", "1", "--out", ev])
    assert changed.exit_code == 1 and "holds a run of another spec" in changed.output

    def key(**params):
        return EvalSpec(program="direct", dataset="hotpotqa", n=1, params=params).key()

    assert key(_compiled="/a/c.json") != key(_compiled="/b/c.json")  # earlier runs: keyed by the path, as recorded
    same = "f" * 64
    assert key(_compiled="/a/c.json", _compiled_sha256=same) == key(_compiled="/b/c.json", _compiled_sha256=same)


def test_evaluate_compiled_applies_param_in_place_of_the_stored_setting(scripted, tmp_path, monkeypatch):
    """`--param` with `--compiled` runs with it (the spec records it), not silently with the stored value."""
    from tests.fakes import tree_retriever

    path = save_compiled(build_program("rta", tree_retriever(), k=5), tmp_path / "c.json", name="rta",
                         dataset="hotpotqa", retriever="dense")
    assert load_program(path, retriever=tree_retriever(), overrides={"k": 2}).k == 2
    assert load_program(path, retriever=tree_retriever()).k == 5
    with pytest.raises(ValueError, match="nonsense"):
        load_program(path, retriever=tree_retriever(), overrides={"nonsense": 1})
    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda dataset, kind, corpus=None: searcher)
    result = CliRunner().invoke(app, ["evaluate", "--compiled", str(path), "--param", "k=2", "--n", "1",
                                      "--out", str(tmp_path / "ev")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "ev" / "spec.json").read_text())["params"]["k"] == 2
    assert [k for _, k in searcher.queries] == [2]  # the question searched for 2 passages, not 5


def test_gepa_with_one_train_question_fails_before_any_lm_call(scripted, tmp_path):
    with pytest.raises(ValueError, match="at least 2"):
        run_optimize(_spec(optimizer="gepa", train=1), tmp_path / "g")
    assert scripted._engine_spec.calls == []


def test_the_zero_shot_side_can_start_from_a_reference_run(scripted, tmp_path):
    from treeqa.evaluation.runs import run_evaluation

    spec = _spec()
    reference = tmp_path / "reference"
    run_evaluation(spec.eval_spec(), reference)  # e.g. `treeqa evaluate` into benchmarks/runs/...
    before = (reference / "predictions.jsonl").read_text()
    calls = len(scripted._engine_spec.calls)
    report = run_optimize(_spec(zero_shot_from=str(reference)), tmp_path / "O")["report"]
    # the one train question bootstrapped and the two dev questions compiled; no zero-shot call
    assert len(scripted._engine_spec.calls) - calls == 1 + 2
    assert report["zero_shot"]["n"] == 2 and (reference / "predictions.jsonl").read_text() == before
    other = tmp_path / "other"
    run_evaluation(_spec(dev=1).eval_spec(), other)
    calls = len(scripted._engine_spec.calls)
    with pytest.raises(ValueError, match="holds a run of another spec"):
        run_optimize(_spec(zero_shot_from=str(other)), tmp_path / "O2")
    assert len(scripted._engine_spec.calls) == calls and not (tmp_path / "O2").exists()  # refused up front


def test_the_compile_runs_first_and_the_zero_shot_run_is_adopted_as_it_stands_then(scripted, tmp_path,
                                                                                    monkeypatch):
    """A long optimize reports its compile and compiled run first; a zero-shot run another process
    is still filling is taken at the end, with what it has by then."""
    import treeqa.optimize.run as optimize
    from treeqa.evaluation.runs import run_evaluation

    spec = _spec()
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "spec.json").write_text(spec.eval_spec().model_dump_json())  # an empty run of the spec
    order, real_run = [], optimize.run_evaluation

    def spy(eval_spec, out_dir, program=None):
        order.append(out_dir.name)
        result = real_run(eval_spec, out_dir, program=program)
        if out_dir.name == "compiled":  # meanwhile the reference run grows to both questions
            run_evaluation(spec.eval_spec(), reference)
        return result

    monkeypatch.setattr(optimize, "run_evaluation", spy)
    calls = len(scripted._engine_spec.calls)
    report = run_optimize(_spec(zero_shot_from=str(reference)), tmp_path / "O")["report"]
    assert order == ["compiled", "zero-shot"]
    # the train question, the two compiled dev questions, the reference's two; none asked again
    assert len(scripted._engine_spec.calls) - calls == 1 + 2 + 2
    assert report["zero_shot"]["n"] == 2


def test_the_plain_command_compiles_with_the_programs_default(fixture_data):
    from typer.testing import CliRunner

    from treeqa.cli import app

    tor = CliRunner().invoke(app, ["optimize", "--program", "tor", "--plan"])
    direct = CliRunner().invoke(app, ["optimize", "--program", "direct", "--plan"])
    chosen = CliRunner().invoke(app, ["optimize", "--program", "tor", "--optimizer", "bootstrap", "--plan"])
    assert tor.exit_code == 0 and "(path-judge+released-settings+trained-reader, 100 train)" in tor.output
    assert "(bootstrap, 20 train)" in direct.output and "(bootstrap, 20 train)" in chosen.output


def test_a_new_compiler_is_one_file(scripted, tmp_path):
    """A file that registers a compiler is offered, planned, composed and run, nothing else changed."""
    import importlib.util

    from treeqa.teleprompt.base import COMPILERS

    (tmp_path / "toy_compiler.py").write_text(
        "from dspy.teleprompt.teleprompt import Teleprompter\n"
        "from treeqa.teleprompt import Compiler, register\n\n"
        "class Instruct(Teleprompter):\n"
        "    def compile(self, student, *, trainset, **kw):\n"
        "        program = student.deepcopy()\n"
        "        for _, p in program.named_predictors():\n"
        "            p.signature = p.signature.with_instructions('Answer tersely.')\n"
        "        return program\n\n"
        "register(Compiler('toy', lambda c: (Instruct(), {}), lambda per_q, n, t: 7, preparer=True))\n")
    spec = importlib.util.spec_from_file_location("toy_compiler", tmp_path / "toy_compiler.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    try:
        assert "toy" in optimizer_names()
        assert run_optimize(_spec(optimizer="toy+bootstrap", train=1, max_demos=1), tmp_path / "O",
                            plan_only=True)["plan"]["compile_max"] == 7 + 1
        result = run_optimize(_spec(optimizer="toy", train=1), tmp_path / "O2")
        assert result["report"]["compile"]["instructions_changed"] == ["answer"]
    finally:
        COMPILERS.unregister("toy")


def test_no_zero_shot_evaluates_the_compiled_side_alone_and_a_later_run_adds_it(scripted, tmp_path):
    """--no-zero-shot, for a compile whose baseline is measured elsewhere: no zero-shot call, a
    report of the compiled side alone; the same run again without it adds the zero-shot side
    and reads the compile and compiled records it has (the setting is not part of the spec)."""
    out = tmp_path / "O"
    calls = len(scripted._engine_spec.calls)
    result = run_optimize(_spec(zero_shot=False), out)
    assert len(scripted._engine_spec.calls) - calls == 1 + 2  # the train question, the two compiled
    report = result["report"]
    assert report["zero_shot"] is None and report["compiled_vs_zero_shot"] is None
    assert report["compiled"]["n"] == 2 and not (out / "zero-shot").exists()
    assert "zero-shot side was skipped" in (out / "report.md").read_text()
    assert "| direct compiled (bootstrap) |" in result["table"] and "zero-shot |" not in result["table"]
    calls = len(scripted._engine_spec.calls)
    report = run_optimize(_spec(), out)["report"]
    assert len(scripted._engine_spec.calls) - calls == 2  # the two zero-shot questions alone
    assert report["zero_shot"]["n"] == 2 and report["compiled_vs_zero_shot"] is not None
    with pytest.raises(ValueError, match="nothing would adopt it"):
        run_optimize(_spec(zero_shot=False, zero_shot_from=str(out / "zero-shot")), tmp_path / "O2")
    assert not (tmp_path / "O2").exists()


def test_the_cli_skips_the_zero_shot_side_on_request(scripted, tmp_path):
    out = tmp_path / "cli"
    result = CliRunner().invoke(app, ["optimize", "--program", "direct", "--optimizer", "bootstrap", "--train", "1",
                                      "--dev", "2", "--no-zero-shot", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "zero-shot side skipped" in result.output
    assert json.loads((out / "report.json").read_text())["zero_shot"] is None


def test_the_default_compile_rule_is_the_specs():
    """An optimizer or train size left unset takes the program's own compile, or 20 train
    questions for another optimizer, and the spec says so where that is not the program's size."""
    own = OptimizeSpec(program="tor", optimizer=None, train=None)
    assert (own.optimizer, own.train, own.default_compile_note) == ("path-judge+released-settings+trained-reader",
                                                                    100, None)
    paper = OptimizeSpec(program="tor", optimizer=None, train=None, reader="none")  # the paper's reader
    assert (paper.optimizer, paper.train) == ("path-judge", 100)
    other = OptimizeSpec(program="tor", optimizer="bootstrap", train=None)
    assert (other.optimizer, other.train) == ("bootstrap", 20)
    assert "20 train questions" in other.default_compile_note and "path-judge" in other.default_compile_note
    told = OptimizeSpec(program="tor", optimizer="bootstrap", train=7)
    assert (told.train, told.default_compile_note) == (7, None)


def test_a_program_is_resolved_once_at_the_door(scripted, tmp_path, monkeypatch):
    """The spec resolves its program when it is made; compiling, evaluating and reporting use
    that, and check nothing again."""
    import treeqa.programs

    spec = _spec()
    resolved = []
    real = treeqa.programs.resolve_program
    monkeypatch.setattr(treeqa.programs, "resolve_program", lambda *a, **k: resolved.append(a) or real(*a, **k))
    monkeypatch.setattr("treeqa.evaluation.runs.resolve_program", treeqa.programs.resolve_program)
    monkeypatch.setattr("treeqa.optimize.spec.resolve_program", treeqa.programs.resolve_program)
    run_optimize(spec, tmp_path / "O")
    # once more for the evaluation spec both sides share (a spec of its own, checked as one);
    # compiling, building both programs, evaluating and reporting resolve nothing again
    assert resolved == [("direct", {}, None)]


def test_against_runs_a_baseline_on_the_same_questions_and_pairs_each_side_with_it(scripted, tmp_path):
    """`make demo`'s run: rta beside the zero-shot and compiled program, on the same questions, with a
    line that says so few questions show the way, not a claim."""
    lines = []
    result = run_optimize(_spec(against="cot", optimizer="bootstrap"), tmp_path / "o", echo=lines.append)
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    against = report["against"]
    assert against["program"] == "cot" and against["summary"]["n"] == 2
    assert set(against) == {"program", "summary", "compiled vs cot", "zero-shot vs cot"}
    def ids(side):
        records = (tmp_path / "o" / side / "predictions.jsonl").read_text().splitlines()
        return [json.loads(line)["id"] for line in records]

    assert ids("baseline") == ids("compiled")  # the same questions
    assert "| cot |" in result["table"] and "compiled vs cot" in (tmp_path / "o" / "report.md").read_text()
    assert any("show the way, not a claim" in line for line in lines) and "not a claim" in report["note"]
    assert plan(_spec(against="cot"))["against_max"] == 2
    with pytest.raises(ValueError, match="nosuch"):
        _spec(against="nosuch")


def test_a_compile_can_start_from_a_compiled_file(scripted, tmp_path):
    """`--from`: the stages run on the file's program (its demos kept), and the new file says
    which file, by hash, it grew from; a file of another program or dataset is refused first."""
    from treeqa.optimize.run import check

    program = build_program("direct")
    program.answer.demos = [dspy.Example(question="What is the capital of France?", answer="Paris")]
    source = save_compiled(program, tmp_path / "src" / "compiled.json", name="direct", dataset="hotpotqa",
                           retriever="dense")
    checked = check(_spec(optimizer="bootstrap", start_from=str(source)), tmp_path / "checked")
    assert [d["answer"] for d in checked.program.answer.demos] == ["Paris"]  # the file's program is the student
    run_optimize(_spec(optimizer="bootstrap", max_demos=1, start_from=str(source), zero_shot=False), tmp_path / "o")
    recipe, _ = read_recipe(tmp_path / "o" / "compiled.json")
    assert recipe["compile"]["started_from"]["file"] == str(source)
    assert len(recipe["compile"]["started_from"]["sha256"]) == 64
    with pytest.raises(ValueError, match="holds a compiled 'direct' program"):
        run_optimize(_spec(program="cot", optimizer="bootstrap", start_from=str(source)), tmp_path / "third")
    with pytest.raises(ValueError, match="compiled on hotpotqa, not musique"):
        run_optimize(_spec(dataset="musique", dev=1, optimizer="bootstrap", start_from=str(source)), tmp_path / "4")
