import json

import dspy
import pytest

from tests.fakes import FakeRetriever, generic_lm, scripted_lm, use_lm
from treeqa.data import load_examples
from treeqa.optimize import OptimizeSpec, compile_call_bound, plan, run_optimize, stages
from treeqa.programs import build_program
from treeqa.teleprompt import RecordedReader, record_reads
from treeqa.teleprompt.metrics import em_metric

# the first question is answered right, the second wrong: one read to learn from
ANSWERS = {"cog railway": "1871", "Rigi Railways": "Mount Pilatus"}


def learn(call):
    """Answers the first train question right; the second only once a demo is in the prompt."""
    prompt = json.dumps(call.messages)
    if "cog railway" in call.messages[-1]["content"]:
        return {"answer": "1871"}
    return {"answer": "Mount Rigi" if "1871" in prompt else "Mount Pilatus"}


def learner():
    return scripted_lm(learn, whole_call=True)[0]


def test_reads_are_recorded_once_and_the_reader_compiled_on_them(fixture_data, tmp_path):
    train = load_examples("hotpotqa", "train", n=2)
    lm = learner()
    retriever = FakeRetriever()
    record = tmp_path / "reads.jsonl"
    with dspy.context(lm=lm):
        compiled = RecordedReader(em_metric, record_path=record, candidates=1).compile(
            build_program("rta", retriever), trainset=train)
    reads = [json.loads(line) for line in record.read_text().splitlines()]
    assert [r["id"] for r in reads] == [ex.id for ex in train]
    assert set(reads[0]["inputs"]) == {"question", "passages"} and reads[0]["answers"] == ["1871"]
    assert compiled.reader_fit == {"reader": "answer", "teleprompter": "random-search", "recorded": 2,
                                   "examples": 2, "prepared_em": 50.0, "compiled_em": 100.0, "kept": "compiled",
                                   "demos": 1}
    (demo,) = compiled.answer.demos  # the read it got right, with its own passages
    assert demo["answer"] == "1871" and demo["passages"] == reads[0]["inputs"]["passages"]
    searches = len(retriever.queries)
    with dspy.context(lm=lm):
        again = record_reads(build_program("rta", retriever), train, record)
    assert again == reads and len(retriever.queries) == searches  # resumed: no program run again


def test_a_prepared_reader_that_reads_better_than_every_candidate_is_kept(fixture_data, tmp_path):
    """DSPy's teleprompters start from a reset copy, so the demos a preparer gave the reader (the
    annotated ones of a path-judge compile) were dropped for whatever scored best among plain and
    bootstrapped readers, even when that read worse on train than the reader had before."""
    train = load_examples("hotpotqa", "train", n=2)

    def respond(call):  # the second question only with the preparer's hint in the prompt
        if "cog railway" in call.messages[-1]["content"]:
            return {"answer": "1871"}
        return {"answer": "Mount Rigi" if "HINT" in json.dumps(call.messages) else "Mount Pilatus"}

    lm = scripted_lm(respond, whole_call=True)[0]
    program = build_program("rta", FakeRetriever())
    hint = dspy.Example(question="HINT", passages=["HINT"], answer="HINT")
    program.answer.demos = [hint]
    with dspy.context(lm=lm):
        compiled = RecordedReader(em_metric, candidates=1).compile(program, trainset=train)
    fit = compiled.reader_fit
    assert (fit["prepared_em"], fit["kept"]) == (100.0, "prepared") and fit["compiled_em"] < 100.0
    assert compiled.answer.demos == [hint] and program.answer.demos == [hint]


def test_a_compile_stopped_anywhere_replays_the_readers_logged_answers(fixture_data, tmp_path):
    """The random search is most of a compile's hours; on a new machine DSPy's cache is empty, so
    the reader's answers are logged in the run folder and a rerun calls only for what is missing."""
    train = load_examples("hotpotqa", "train", n=2)
    record = tmp_path / "reads.jsonl"
    log = tmp_path / "reader-calls.jsonl"

    def compile_with(respond):
        lm, engine = scripted_lm(respond, whole_call=True)
        with dspy.context(lm=lm):
            program = RecordedReader(em_metric, record_path=record, candidates=1).compile(
                build_program("rta", FakeRetriever()), trainset=train)
        return program, len(engine.calls)

    first, first_calls = compile_with(learn)
    logged = log.read_text().splitlines()
    assert first.reader_fit["kept"] == "compiled" and 0 < len(logged) < first_calls  # reads + repeats aside

    def never(call):
        return AssertionError("a logged answer was asked of the LM again")

    again, calls = compile_with(never)  # every answer replayed, the bootstrapped demo traced as before
    assert calls == 0
    assert again.reader_fit == first.reader_fit and again.answer.demos == first.answer.demos

    log.write_text("\n".join(logged[:2]) + "\n" + logged[2][:20])  # stopped after two answers, mid-line
    resumed, calls = compile_with(learn)
    assert calls == len(logged) - 2 and resumed.answer.demos == first.answer.demos


def test_a_torn_record_line_is_run_again(fixture_data, tmp_path):
    train = load_examples("hotpotqa", "train", n=2)
    record = tmp_path / "reads.jsonl"
    with dspy.context(lm=generic_lm(ANSWERS)):
        record_reads(build_program("direct"), train[:1], record)
        record.write_text(record.read_text() + '{"id": "hp-tr')  # killed mid-line
        reads = record_reads(build_program("direct"), train, record)
    assert [r["id"] for r in reads] == [ex.id for ex in train]


def test_programs_without_a_reader_and_bad_chains_are_refused():
    with pytest.raises(ValueError, match="cot declares no reader"):
        OptimizeSpec(program="cot", optimizer="reader")
    with pytest.raises(ValueError, match="first of two must be a preparer"):
        stages("reader+path-judge")
    with pytest.raises(ValueError, match="unknown optimizer 'path-judge\\+nope'"):
        stages("path-judge+nope")
    assert stages("path-judge+reader") == ["path-judge", "reader"]
    settings = OptimizeSpec(program="tor").tuning()
    assert compile_call_bound("path-judge+reader", 6, 10, settings) == 0 + 10 * 6 + 10 + 10 * 6


def test_a_composed_compile_keeps_the_judge_and_compiles_the_reader(fixture_data, tmp_path, monkeypatch):

    lm = learner()
    use_lm(monkeypatch, lm)
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: FakeRetriever())
    spec = OptimizeSpec(program="rta", dataset="hotpotqa", optimizer="settings+reader", train=2, dev=2,
                        candidates=1)
    assert plan(spec)["compile_max"] == compile_call_bound("settings", 1, 2, spec.tuning()) + 2 + 2 + 2 * 5
    result = run_optimize(spec, tmp_path / "O")
    saved = json.loads((tmp_path / "O" / "compiled.json").read_text())
    fit = saved["treeqa"]["compile"]
    assert fit["optimizer"] == "settings+reader" and fit["reader_fit"]["examples"] == 2
    assert "settings_search" in fit and len(saved["answer"]["demos"]) >= 1  # reads it got right
    assert (tmp_path / "O" / "recorded-reads.jsonl").is_file()
    assert result["report"]["compiled"]["n"] == 2
