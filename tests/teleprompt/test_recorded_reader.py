import json

import dspy
import pytest

from tests.fakes import FakeRetriever, ScriptedEngine, generic_lm, generic_responder, scripted_lm, use_lm
from treeqa.data import load_examples
from treeqa.data.corpus import Passage
from treeqa.lm import request_messages
from treeqa.optimize import OptimizeSpec, compile_call_bound, plan, run_optimize, stages
from treeqa.programs import build_program
from treeqa.teleprompt import RecordedReader, record_reads
from treeqa.teleprompt.metrics import em_metric
from treeqa.teleprompt.one_predictor import as_demo, demo_pool

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
                                   "examples": 2, "demo_pool": 2, "prepared_em": 50.0, "compiled_em": 100.0,
                                   "kept": "compiled", "demos": 1}
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
    with pytest.raises(ValueError, match="each at most once and in that order"):
        stages("reader+path-judge")
    with pytest.raises(ValueError, match="each at most once and in that order"):
        stages("reader+finetune")
    with pytest.raises(ValueError, match="each at most once and in that order"):
        stages("reader+mipro")
    assert stages("path-judge+finetune+reader") == ["path-judge", "finetune", "reader"]
    assert stages("finetune+reader") == ["finetune", "reader"]
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


class WindowedEngine(ScriptedEngine):
    """A scripted engine with a context window, counted in words, that fails a prompt over it
    as llama.cpp does."""

    def __init__(self, respond, window: int):
        super().__init__(respond)
        self.context_tokens, self.overflows = window, 0

    def count_prompt_tokens(self, messages):
        return sum(len(str(m["content"]).split()) for m in messages)

    def complete(self, request):
        if self.count_prompt_tokens(request_messages(request)) > self.context_tokens:
            self.overflows += 1
            raise ValueError(f"Requested tokens exceed context window of {self.context_tokens}")
        return super().complete(request)


def reads(lengths: list[int]) -> list[dspy.Example]:
    return [dspy.Example(question=f"q{i}", passages=[" ".join(["word"] * n)], answers=[f"a{i}"]
                         ).with_inputs("question", "passages") for i, n in enumerate(lengths)]


def test_demos_are_drawn_only_from_reads_that_fit_the_window_beside_any_read():
    """Two long reads as demos overflow the longest read's prompt; the pool keeps the reads of
    which two fit beside it, and every prompt a candidate drawn from the pool makes fits."""
    engine = WindowedEngine(lambda call: {"answer": "x"}, window=2500)
    lm = dspy.LM("local/windowed", engine=engine, cache=False, num_retries=0)
    predictor = dspy.Predict("question, passages: list[str] -> answer")
    examples = reads([40, 1500, 60, 700])
    with dspy.context(lm=lm):
        pool = demo_pool(predictor, examples, max_demos=2)
        assert [ex.question for ex in pool] == ["q0", "q2"]

        def tokens(demos, example):
            return engine.count_prompt_tokens(dspy.ChatAdapter().format(
                predictor.signature, [as_demo(d, predictor.signature) for d in demos], example.inputs().toDict()))

        assert all(tokens([a, b], ex) <= 2500 for a in pool for b in pool for ex in examples)
        assert tokens([examples[1], examples[3]], examples[1]) > 2500  # what an unbounded draw could make
        assert demo_pool(predictor, examples, max_demos=0) == examples  # no demos: nothing to bound
    with dspy.context(lm=scripted_lm(lambda call: {"answer": "x"}, whole_call=True)[0]):
        assert demo_pool(predictor, examples, max_demos=2) == examples  # a window not known: every read


def test_a_read_too_long_to_be_a_demo_is_not_bootstrapped(fixture_data, tmp_path):
    """The read the reader gets right is the long one: without the window it is the demo (the
    first test above); here it cannot be, so no demo is bootstrapped and no call overflows."""
    train = load_examples("hotpotqa", "train", n=2)
    long = [Passage(f"long{i}", f"Long {i}", " ".join(["railway"] * 300)) for i in range(5)]
    retriever = FakeRetriever(fixed={train[0].question: long})
    engine = WindowedEngine(learn, window=1500)
    lm = dspy.LM("local/windowed", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        compiled = RecordedReader(em_metric, record_path=tmp_path / "reads.jsonl", candidates=1).compile(
            build_program("rta", retriever), trainset=train)
    fit = compiled.reader_fit
    assert (fit["examples"], fit["demo_pool"], fit["kept"]) == (2, 1, "prepared")
    assert compiled.answer.demos == [] and engine.overflows == 0


def test_mipro_draws_its_demos_from_the_pool_and_scores_every_read(fixture_data, tmp_path):
    """reader-mipro: with the window known, MIPROv2 bootstraps from the reads that fit only (the
    long read it answers right would overflow the prompt as a demo) and scores on all of them;
    without it, MIPROv2 splits the reads its own way."""
    train = load_examples("hotpotqa", "train", n=2)
    long = [Passage(f"long{i}", f"Long {i}", " ".join(["railway"] * 300)) for i in range(5)]
    propose = generic_responder()

    def respond(call):  # the reader as `learn` answers; MIPROv2's proposer gets any well-formed reply
        return learn(call) if call.kind == "answer" else propose(call)

    engine = WindowedEngine(respond, window=1500)
    lm = dspy.LM("local/windowed", engine=engine, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        compiled = RecordedReader(em_metric, teleprompter="mipro", record_path=tmp_path / "reads.jsonl",
                                  candidates=2, trials=2, prompt_model=lm).compile(
            build_program("rta", FakeRetriever(fixed={train[0].question: long})), trainset=train)
    assert (compiled.reader_fit["teleprompter"], compiled.reader_fit["demo_pool"]) == ("mipro", 1)
    assert engine.overflows == 0 and compiled.answer.demos == []
    plain_lm = dspy.LM("local/plain", engine=ScriptedEngine(respond), cache=False, num_retries=0)
    with dspy.context(lm=plain_lm):  # no window: the long read is a demo, and it teaches the second answer
        plain = RecordedReader(em_metric, teleprompter="mipro", candidates=2, trials=2, prompt_model=plain_lm).compile(
            build_program("rta", FakeRetriever(fixed={train[0].question: long})), trainset=train)
    assert plain.reader_fit["demo_pool"] == 2 and plain.reader_fit["kept"] == "compiled"
    assert plain.answer.demos[0]["answer"] == "1871"
