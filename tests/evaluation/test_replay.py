"""Replaying recorded ToR searches (`treeqa.evaluation.replay`): the rebuilt search gives the reader what the
live one gave it, a program whose search differs is refused, and `treeqa replay` makes one reader
call a question on a run's records."""

import copy
import dataclasses
import json

import dspy
import pytest
from typer.testing import CliRunner

from tests.fakes import answering, hashing_embed, review, review_kind, run, scripted_lm, tree_retriever, use_lm
from treeqa.cli import app
from treeqa.evaluation.replay import ReplayError, check_same_search, rebuild_run
from treeqa.judging.path_judge import FEATURES, Logit, PathJudge
from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledFile, save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews


def varied(call):
    """Accept some paths, search from others, reject the rest, by the last paragraph's number;
    analyses name the path, so a piece of evidence read back with the wrong path shows."""
    last = int(call.titles[-1][1:])
    path = "/".join(call.titles)
    if last % 4 == 0:
        return review("accept", analysis=f"enough in {path}")
    if last % 4 == 1:
        return review("search", next_query=f"after {last % 3}")  # repeated queries: pruned paragraphs
    if last % 4 == 2:
        return review("reject")
    return {"relevant": True, "sufficient": False, "action": "reject", "next_query": "", "analysis": ""}


def never_enough(call):
    return review("search", next_query=f"after {call.titles[-1]}") if len(call.titles) < 3 else review("reject")


def passages_of(retriever):
    return {p.id: p for made in retriever._made.values() for p in made}


def reads(engine):
    return [call.messages for call in engine.of("fuse")]


@pytest.mark.parametrize("script", [varied, never_enough])
@pytest.mark.parametrize("read_top", [None, 3])
def test_the_rebuilt_search_gives_the_reader_what_the_live_one_gave(script, read_top):
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(5, 3, 3), expansion="direct", read_top=read_top,
                            embed_fn=hashing_embed)
    live, live_engine = run(program, answering(script))
    assert live.tree["stats"]["distinct_retrieved"] > 15  # the answer re-ranks recall's first 15
    tree = json.loads(json.dumps(live.tree))  # as the run's record holds it
    rebuilt = rebuild_run(tree, passages_of(retriever))
    lm, engine = scripted_lm(answering(script), classify=review_kind, whole_call=True)
    with dspy.context(lm=lm):
        again = program.answer_from(rebuilt)
    assert engine.kinds() == ["fuse"]  # the reader alone: no review, no completion, no search
    assert reads(engine) == reads(live_engine)
    assert again.answer == live.answer and again.retrieved_ids == live.retrieved_ids
    assert again.evidence == live.evidence and again.tree["nodes"] == live.tree["nodes"]
    if script is varied:
        assert live.evidence and live.tree["stats"]["pruned_repetitive"] > 0
    else:
        assert not live.evidence


def test_a_paragraph_missing_from_the_corpus_is_an_error():
    retriever = tree_retriever()
    live, _ = run(TreeOfReviews(retriever=retriever, widths=(3, 2)), answering(never_enough))
    passages = passages_of(retriever)
    del passages["n2"]
    with pytest.raises(ReplayError, match="N2"):
        rebuild_run(live.tree, passages)


def _recipe(tmp_path, name, **settings):
    program = TreeOfReviews(retriever=tree_retriever(), **settings)
    return program, save_compiled(program, tmp_path / f"{name}.json", name="tor", dataset="hotpotqa", retriever="dense")


def test_only_a_program_with_the_recorded_search_may_replay_it(tmp_path):
    n = len(FEATURES)
    decision = Logit(mean=[0.0] * n, scale=[1.0] * n, coef=[1.0] * n, intercept=0.0, threshold=0.5)
    judge = PathJudge(relevance=decision, sufficiency=decision).model_dump()
    _, source = _recipe(tmp_path, "source", widths=(3, 2))
    reader, other_reading = _recipe(tmp_path, "reading", widths=(3, 2), read_top=3, max_context_chars=3000)
    reader.fuse.demos = [dspy.Example(question="q", evidence=["e"], answer="a")]
    other_reading = save_compiled(reader, tmp_path / "reading.json", name="tor", dataset="hotpotqa",
                                  retriever="dense")
    check_same_search(CompiledFile.read(source), CompiledFile.read(other_reading))  # the reading may change
    _, in_rtas_prompt = _recipe(tmp_path, "passages", widths=(3, 2), fusion="passages")
    check_same_search(CompiledFile.read(source), CompiledFile.read(in_rtas_prompt))  # a reader of no analysis

    _, judged_here = _recipe(tmp_path, "judged-here", widths=(3, 2), path_judge=judge)
    noise = PathJudge(relevance=decision.model_copy(update={"coef": [1.0 + 4e-7] * n}), sufficiency=decision)
    _, judged_there = _recipe(tmp_path, "judged-there", widths=(3, 2), path_judge=noise.model_dump())
    check_same_search(CompiledFile.read(judged_here), CompiledFile.read(judged_there))  # refitted on another CPU
    moved = PathJudge(relevance=decision.model_copy(update={"coef": [1.0 + 1e-3] * n}), sufficiency=decision)
    _, judged_apart = _recipe(tmp_path, "judged-apart", widths=(3, 2), path_judge=moved.model_dump())
    with pytest.raises(ReplayError, match="setting path_judge"):
        check_same_search(CompiledFile.read(judged_here), CompiledFile.read(judged_apart))

    _, wider = _recipe(tmp_path, "wider", widths=(3, 3))
    _, judged = _recipe(tmp_path, "judged", widths=(3, 2), path_judge=judge)
    _, judged_paragraphs = _recipe(tmp_path, "judged-paragraphs", widths=(3, 2), path_judge=judge, fusion="paragraph")
    with pytest.raises(ReplayError, match="setting fusion differs: evidence reads the analyses"):
        check_same_search(CompiledFile.read(judged_paragraphs), CompiledFile.read(judged))  # none were written
    check_same_search(CompiledFile.read(judged), CompiledFile.read(judged_paragraphs))
    reviewer, taught = _recipe(tmp_path, "taught", widths=(3, 2))
    reviewer.review.demos = [dspy.Example(question="q", paragraphs=["p"], relevant=True)]
    taught = save_compiled(reviewer, tmp_path / "taught.json", name="tor", dataset="hotpotqa", retriever="dense")
    for target, problem in [(wider, "setting widths"), (judged, "setting path_judge"),
                            (taught, "predictor review: its demos")]:
        with pytest.raises(ReplayError, match=problem):
            check_same_search(CompiledFile.read(source), CompiledFile.read(target))
    rta = save_compiled(build_program("rta", tree_retriever()), tmp_path / "rta.json", name="rta",
                        dataset="hotpotqa", retriever="dense")
    with pytest.raises(ReplayError, match="does not read apart from its search"):
        check_same_search(CompiledFile.read(rta), CompiledFile.read(rta))
    found = CompiledFile.read(source)
    with pytest.raises(ReplayError, match="dataset"):
        check_same_search(found, dataclasses.replace(found, dataset="musique", state=copy.deepcopy(found.state)))


def test_replay_makes_one_reader_call_a_question_and_resumes(fixture_data, tmp_path, monkeypatch):
    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda dataset, kind, corpus=None: searcher)
    lm, engine = scripted_lm(answering(varied, answer="Paris"), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    _, source = _recipe(tmp_path, "source", widths=(3, 2))
    cli = CliRunner()
    result = cli.invoke(app, ["evaluate", "--compiled", str(source), "--n", "2", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    live = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    searcher.passages = list(passages_of(searcher).values())
    reader, reading = _recipe(tmp_path, "reading", widths=(3, 2), read_top=2)

    before = len(engine.calls)
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(reading),
                              "--out", str(tmp_path / "replay")])
    assert result.exit_code == 0, result.output
    assert engine.kinds()[before:] == ["fuse", "fuse"]
    replayed = [json.loads(line) for line in (tmp_path / "replay" / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in replayed] == [r["id"] for r in live]
    assert all(r["lm_calls"] == 1 and r["prediction"] == "Paris" for r in replayed)
    for old, new in zip(live, replayed, strict=True):
        assert new["tree"]["nodes"] == old["tree"]["nodes"]
        assert new["tree"]["replayed"]["search_lm_calls"] == old["lm_calls"] - 1
    spec = json.loads((tmp_path / "replay" / "spec.json").read_text())
    assert spec["params"]["read_top"] == 2 and spec["params"]["_replay_of"] == live[0]["run"]
    searched = json.loads((tmp_path / "replay" / "summary.json").read_text())["replayed"]
    assert searched["questions"] == 2
    assert searched["search_lm_calls_per_q"] == sum(r["lm_calls"] - 1 for r in live) / 2
    assert "LM calls" in result.output and "before this reading" in result.output
    assert searched["includes_reading"] == 0

    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(reading),
                              "--out", str(tmp_path / "replay")])
    assert result.exit_code == 0 and engine.kinds()[before:] == ["fuse", "fuse"]  # resumed: nothing to do

    _, wider = _recipe(tmp_path, "wider", widths=(3, 3))
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(wider),
                              "--out", str(tmp_path / "refused")])
    assert result.exit_code == 1 and "setting widths differs" in result.output
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(source), "--param", "depth=1",
                              "--out", str(tmp_path / "refused")])
    assert result.exit_code == 1 and "only its reading changes" in result.output
    assert not (tmp_path / "refused").exists()

    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(source), "--param", "read_top=2",
                              "--out", str(tmp_path / "as-param")])
    assert result.exit_code == 0, result.output
    spec = json.loads((tmp_path / "as-param" / "spec.json").read_text())
    assert spec["params"]["read_top"] == 2 and spec["params"]["_replay_of"] == live[0]["run"]

    before = len(engine.calls)
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(source), "--param", "fusion=passages",
                              "--out", str(tmp_path / "in-rtas-prompt")])
    assert result.exit_code == 0, result.output
    reads = engine.calls[before:]
    assert len(reads) == 2 and all(set(c.inputs) == {"question", "passages"} for c in reads)
    assert all(1 <= len(c.inputs["passages"]) <= 5 for c in reads)


def test_a_run_that_has_not_reached_every_question_is_replayed_as_far_as_it_got(fixture_data, tmp_path,
                                                                                monkeypatch):
    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda dataset, kind, corpus=None: searcher)
    lm, engine = scripted_lm(answering(varied), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    _, source = _recipe(tmp_path, "source", widths=(3, 2))
    cli = CliRunner()
    assert cli.invoke(app, ["evaluate", "--compiled", str(source), "--n", "2",
                            "--out", str(tmp_path / "run")]).exit_code == 0
    records = (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    (tmp_path / "run" / "predictions.jsonl").write_text(records[0] + "\n")  # a run still going
    searcher.passages = list(passages_of(searcher).values())
    before = len(engine.calls)
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(source),
                              "--out", str(tmp_path / "replay")])
    assert result.exit_code == 0, result.output
    assert "replayed 1 of the 2 questions" in result.output and engine.kinds()[before:] == ["fuse"]
    (tmp_path / "run" / "predictions.jsonl").write_text("\n".join(records) + "\n")  # the run got further
    result = cli.invoke(app, ["replay", str(tmp_path / "run"), "--compiled", str(source),
                              "--out", str(tmp_path / "replay")])
    assert result.exit_code == 0, result.output
    assert engine.kinds()[before:] == ["fuse"] * 2
    assert len((tmp_path / "replay" / "predictions.jsonl").read_text().splitlines()) == 2


def test_optimize_reads_its_compiled_side_from_a_runs_recorded_searches(fixture_data, tmp_path, monkeypatch):
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.optimize import OptimizeSpec, run_optimize

    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: searcher)
    lm, engine = scripted_lm(answering(varied, answer="Paris"), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    params = {"widths": [3, 2]}
    source = tmp_path / "zero-shot"  # a zero-shot run: the recorded program is the one its spec builds
    run_evaluation(EvalSpec(program="tor", n=2, params=params), source)
    live = [json.loads(line) for line in (source / "predictions.jsonl").read_text().splitlines()]
    searcher.passages = list(passages_of(searcher).values())

    before = len(engine.calls)
    with pytest.raises(ReplayError, match="n 2 there, 1 here"):  # another sample: refused before compiling
        run_optimize(OptimizeSpec(program="tor", optimizer="reader", train=2, dev=1, params=params,
                                  replay_from=str(source)), tmp_path / "other")
    assert len(engine.calls) == before

    spec = OptimizeSpec(program="tor", optimizer="reader", train=2, dev=2, params=params, candidates=1,
                        replay_from=str(source), zero_shot_from=str(source))
    result = run_optimize(spec, tmp_path / "O")
    records = (tmp_path / "O" / "compiled" / "predictions.jsonl").read_text().splitlines()
    compiled = [json.loads(line) for line in records]
    assert [r["id"] for r in compiled] == [r["id"] for r in live]
    assert all(r["lm_calls"] == 1 and "replayed" in r["tree"] for r in compiled)
    assert [r["tree"]["nodes"] for r in compiled] == [r["tree"]["nodes"] for r in live]
    assert result["report"]["compiled"]["n"] == 2 and result["report"]["zero_shot"]["n"] == 2

    with pytest.raises(ReplayError, match="predictor review: its demos differ"):  # a compile that changes the search
        run_optimize(OptimizeSpec(program="tor", optimizer="annotated", train=2, dev=2, params=params,
                                  replay_from=str(source)), tmp_path / "A")


def test_replay_refuses_records_another_spec_wrote_and_what_is_not_a_file(fixture_data, tmp_path, monkeypatch):
    """A run folder whose predictions.jsonl holds another program's records (here selfask's, beside
    the ToR run's spec.json) is refused as `evaluate` refuses it, and before any compile; a folder,
    a FIFO or a symlink loop where the records should be is named, not read as "no search"."""
    import os

    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.optimize import OptimizeSpec, run_optimize

    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: searcher)
    lm, engine = scripted_lm(answering(varied, answer="Paris"), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    params = {"widths": [3, 2]}
    run_evaluation(EvalSpec(program="tor", n=2, params=params), tmp_path / "tor")
    run_evaluation(EvalSpec(program="selfask", n=2), tmp_path / "selfask")
    searcher.passages = list(passages_of(searcher).values())
    tor = (tmp_path / "tor" / "predictions.jsonl").read_text()
    (tmp_path / "tor" / "predictions.jsonl").write_text((tmp_path / "selfask" / "predictions.jsonl").read_text())
    _, source = _recipe(tmp_path, "source", widths=(3, 2))
    cli = CliRunner()

    before = len(engine.calls)
    result = cli.invoke(app, ["replay", str(tmp_path / "tor"), "--compiled", str(source),
                              "--out", str(tmp_path / "replay")])
    assert result.exit_code == 1 and "holds records of another run spec" in result.output
    with pytest.raises(ReplayError, match="holds records of another run spec"):  # before the compile
        run_optimize(OptimizeSpec(program="tor", optimizer="reader", train=2, dev=2, params=params,
                                  replay_from=str(tmp_path / "tor")), tmp_path / "O")
    assert len(engine.calls) == before and not (tmp_path / "replay").exists()

    records = tmp_path / "tor" / "predictions.jsonl"
    for make, kind in [(lambda p: p.mkdir(), "a folder"), (os.mkfifo, "a FIFO"),
                       (lambda p: (p.symlink_to(p.with_name("loop")), p.with_name("loop").symlink_to(p)),
                        "a symlink loop")]:
        records.unlink() if records.is_symlink() or records.exists() and not records.is_dir() else None
        if records.is_dir():
            records.rmdir()
        make(records)
        result = cli.invoke(app, ["replay", str(tmp_path / "tor"), "--compiled", str(source),
                                  "--out", str(tmp_path / "replay")])
        assert result.exit_code == 1 and f"predictions.jsonl is {kind}" in result.output, result.output
        if kind == "a symlink loop":
            records.with_name("loop").unlink()
    records.unlink()
    records.write_text(tor)  # its own records again: replayed
    result = cli.invoke(app, ["replay", str(tmp_path / "tor"), "--compiled", str(source),
                              "--out", str(tmp_path / "replay")])
    assert result.exit_code == 0, result.output
