"""The beam read in rta's prompt (`reading="passages"`) and its recorded searches read again:
under a path judge no state's rank reads an answer, so `treeqa replay` re-reads the recorded best
state with one call, and refuses what it could not read again exactly."""

import copy
import json

import dspy
import pytest
from typer.testing import CliRunner

from tests.fakes import BeamScript, FakeRetriever, scripted_lm, use_lm
from treeqa.cli import app
from treeqa.data.passage import Passage
from treeqa.evaluation.replay import ReplayError, check_same_search, with_reading
from treeqa.judging.path_judge import FEATURES, Logit, PathJudge
from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledFile, save_compiled

QUESTION = "Where was the author of Alpha born?"
ALPHA = Passage("alpha", "Alpha (novel)", "Alpha is a novel written by Beta Smith.")
BETA = Passage("beta", "Beta Smith", "Beta Smith was born in Gamma.")
NOISE = [Passage(f"noise{i}", f"Noise {i}", f"Noise {i} is about something else.") for i in range(1, 3)]


def _logit(intercept, **weights):
    n = len(FEATURES)
    return Logit(mean=[0.0] * n, scale=[1.0] * n, coef=[weights.get(f, 0.0) for f in FEATURES],
                 intercept=intercept, threshold=0.5)


# sufficient: some paragraph of the path names another (Alpha names Beta Smith)
LINKED = PathJudge(relevance=_logit(-5, linked=10), sufficiency=_logit(-5, linked=10)).model_dump()


def script(kind, inputs):
    """BeamScript's replies; an answer read from passages names how many it was shown."""
    if kind == "answer" and "passages" in inputs:
        return {"answer": f"read {len(inputs['passages'])}"}
    return BeamScript(asks={QUESTION: ["beta query", "other query"]})(kind, inputs)


def retriever():
    def scripted(p):  # the beam script names a state's evidence after its first passage's text
        return Passage(p.id, p.title, f"text 1 about {p.text}")

    return FakeRetriever(fixed={QUESTION: [scripted(ALPHA), scripted(NOISE[0])],
                                "beta query": [scripted(BETA), scripted(NOISE[1])]})


def beam(searcher=None, **settings):
    return build_program("beam", searcher or retriever(), preset="nq", **{"path_judge": LINKED, **settings})


def live(program):
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm):
        return program(question=QUESTION), engine


def by_name(tree):
    return {(s["sub_questions"] or ["root"])[-1]: s for s in tree["states"]}


def test_reading_passages_shows_each_state_the_distinct_passages_behind_it():
    pred, engine = live(beam(reading="passages", pick="vote"))  # a vote reads every state
    reads = [c.inputs for c in engine.of("answer")]
    assert all(set(inputs) == {"question", "passages"} for inputs in reads)
    shown = sorted(len(inputs["passages"]) for inputs in reads)
    assert shown[0] == 0 and shown[-1] == 4  # the seed without evidence; a child of the question's seed
    states = by_name(pred.tree)
    assert states["beta query"]["answer"] == "read 4" and pred.answer == "read 4"
    assert "Beta Smith was born" in next(i for i in reads if len(i["passages"]) == 4)["passages"][2]
    pred, engine = live(beam(reading="passages"))  # the beam's best: the one state read
    assert [len(c.inputs["passages"]) for c in engine.of("answer")] == [4] and pred.answer == "read 4"
    with pytest.raises(ValueError, match="needs evidence='retrieval'"):
        build_program("beam", preset="triviaqa", reading="passages")
    with pytest.raises(ValueError, match="reading: input should be .history. or .passages."):
        beam(reading="summary")


def test_a_recorded_search_is_read_again_with_one_call_and_the_same_reader_gives_the_same_answer():
    searcher = retriever()
    pred, _ = live(beam(searcher))
    tree = json.loads(json.dumps(pred.tree))  # as a record reads back
    corpus = {p.id: p for p in pred.retrieved}  # every passage the search saw

    again, engine = scripted_lm(script)
    with dspy.context(lm=again):
        same = beam(searcher).answer_from_tree(tree, corpus)
        other = beam(searcher, reading="passages").answer_from_tree(tree, corpus)
    assert engine.kinds() == ["answer", "answer"]  # one read each, no search
    assert same.answer == pred.answer == "ans:beta query"
    assert other.answer == "read 4" and other.confidence == pred.confidence
    assert [p.id for p in other.retrieved] == [p.id for p in pred.retrieved]
    best = tree["best"]
    assert other.tree["states"][best]["answer"] == "read 4" and other.tree["settings"]["reading"] == "passages"
    assert [s for i, s in enumerate(other.tree["states"]) if i != best] == [
        s for i, s in enumerate(tree["states"]) if i != best]  # every other state as recorded
    assert other.tree["beams"] == tree["beams"]

    with pytest.raises(ValueError, match="pick='vote'"):
        beam(searcher, pick="vote").answer_from_tree(tree, corpus)
    scored = copy.deepcopy(tree)
    scored["states"][1]["judge_path"] = None  # Score ranked it: it read its answer
    with pytest.raises(ValueError, match="scored by Score"):
        beam(searcher).answer_from_tree(scored, corpus)
    cycle = copy.deepcopy(tree)
    cycle["states"][2]["parent"] = 2
    with pytest.raises(ValueError, match="not an earlier state"):
        beam(searcher).answer_from_tree(cycle, corpus)
    with pytest.raises(ValueError, match="not in the corpus"):
        beam(searcher).answer_from_tree(tree, {})
    torn = copy.deepcopy(tree)
    del torn["states"][1]["evidences"]  # a hostile or torn record: one clear error, not a KeyError
    with pytest.raises(ValueError, match="state 1 is not a state"):
        beam(searcher).answer_from_tree(torn, corpus)
    with pytest.raises(ValueError, match="names no question"):
        beam(searcher).answer_from_tree({**tree, "question": None}, corpus)


def _saved(tmp_path, name, **settings):
    return CompiledFile.read(save_compiled(beam(**settings), tmp_path / f"{name}.json", name="beam",
                                           dataset="hotpotqa", retriever="dense"))


def test_only_the_reading_of_a_judged_beam_with_the_beams_pick_may_change(tmp_path):
    source = _saved(tmp_path, "source")
    check_same_search(source, _saved(tmp_path, "passages", reading="passages"))
    legacy = _saved(tmp_path, "legacy")  # a file written before the setting existed
    legacy.settings.pop("reading")
    check_same_search(legacy, _saved(tmp_path, "passages2", reading="passages"))
    for settings, problem in [(dict(beam_size=3), "setting beam_size differs"), (dict(pick="vote"), "pick=vote")]:
        with pytest.raises(ReplayError, match=problem):
            check_same_search(source, _saved(tmp_path, "other", **settings))
    with pytest.raises(ReplayError, match="no path judge"):
        check_same_search(_saved(tmp_path, "unjudged", path_judge=None), _saved(tmp_path, "unjudged2", path_judge=None))

    taught = beam()
    taught.answer.demos = [dspy.Example(question="q", history="h", answer="a")]
    found = CompiledFile.read(save_compiled(taught, tmp_path / "taught.json", name="beam", dataset="hotpotqa",
                                            retriever="dense"))
    switched = with_reading(found, {"reading": "passages"})
    assert switched.settings["reading"] == "passages" and switched.state["answer"]["demos"] == []
    with pytest.raises(Exception, match="only its reading changes"):
        with_reading(found, {"depth": 1})


def any_question(kind, inputs):
    """Replies for the fixture's questions: two new sub-questions a state, a summary of the first
    passage, an answer from the history or from the passages (naming how many)."""
    if kind == "sub_questions":
        depth = inputs["history"].count("\n")
        return {"sub_questions": json.dumps([f"hop {depth} {i}" for i in (1, 2)])}
    if kind == "evidence":
        return {"evidence": "facts: " + inputs["passages"][0][:40]}
    if kind == "answer":
        return {"answer": f"read {len(inputs['passages'])}" if "passages" in inputs else "from history"}
    raise AssertionError(f"unexpected call for {kind}")


def test_treeqa_replay_reads_a_recorded_beam_run_in_rtas_prompt(fixture_data, tmp_path, monkeypatch):
    searcher = FakeRetriever(naming="counter")  # keeps what it made: the corpus the replay reads
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda dataset, kind, corpus=None: searcher)
    lm, engine = scripted_lm(any_question)
    use_lm(monkeypatch, lm)
    source = save_compiled(beam(searcher), tmp_path / "beam.json", name="beam", dataset="hotpotqa", retriever="dense")
    cli = CliRunner()
    result = cli.invoke(app, ["evaluate", "--compiled", str(source), "--n", "2", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    recorded = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert all(r["prediction"] == "from history" and len(r["tree"]["states"]) > 2 for r in recorded)
    searcher.passages = [p for made in searcher._made.values() for p in made]

    before = len(engine.calls)
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(source), "--param",
                              "reading=passages", "--out", str(tmp_path / "replay")])
    assert result.exit_code == 0, result.output
    assert engine.kinds()[before:] == ["answer", "answer"]
    assert all(set(c.inputs) == {"question", "passages"} for c in engine.calls[before:])
    replayed = [json.loads(line) for line in (tmp_path / "replay" / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in replayed] == [r["id"] for r in recorded]
    assert all(r["lm_calls"] == 1 and r["prediction"].startswith("read ") for r in replayed)
    for old, new in zip(recorded, replayed, strict=True):
        assert new["tree"]["beams"] == old["tree"]["beams"]
        assert new["tree"]["replayed"]["search_lm_calls"] == old["lm_calls"] - 1  # all but the one reading
        assert old["lm_calls_by_predictor"]["answer"] == 1  # the judge ranked the states: only the best was read
