"""Demos from the training annotations: the right labels for each inner predictor, no LM call."""

import json

import dspy
import pytest

from tests.fakes import FIXTURE_DATA, RECORDS, FakeRetriever, generic_lm, scripted_lm, tree_retriever, use_lm
from treeqa.programs import build_program
from treeqa.programs.compiled import load_program, save_compiled
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot


def _no_lm():
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call while building demos"))
    return lm, engine


def test_the_loader_keeps_the_annotations(train):
    hotpot, musique = train
    ann = hotpot[0].annotation
    assert [p["title"] for p in ann["gold"]] == ["Rigi Railways", "Vitznau"]
    assert ann["gold"][0]["facts"] == ["Rigi Railways runs cog trains."]
    assert ann["distractors"][0]["title"] == "Espresso"
    steps = musique[0].annotation
    assert [p["title"] for p in steps["gold"]] == ["Weggis", "Lake Lucerne"]  # hop order, not file order
    assert steps["decomposition"][1] == {"question": "In which region is #1?", "answer": "central Switzerland"}


def test_tor_gets_review_mpc_and_reader_demos_without_any_lm_call(train):
    hotpot, _ = train
    lm, engine = _no_lm()
    with dspy.context(lm=lm):
        compiled = AnnotatedFewShot(k=3, seed=0).compile(TreeOfReviews_(), trainset=hotpot)
    assert engine.calls == []
    reviews = compiled.review.demos
    assert [(d.relevant, d.sufficient, d.action) for d in reviews] == [
        (True, False, "search"), (True, True, "accept"), (False, False, "reject")]
    search, accept, reject = reviews
    assert len(search.paragraphs) == 1 and len(accept.paragraphs) == 2 and len(reject.paragraphs) == 1
    source = next(ex for ex in hotpot if ex.question == search.question)
    gold = source.annotation["gold"]
    assert search.next_query == gold[1]["title"] and source.answers[0] in accept.analysis
    assert reject.paragraphs[0].split(":")[0] in {d["title"] for d in source.annotation["distractors"]}
    mpc = compiled.complete_paragraph.demos
    assert len(mpc) == 3 and all(d.missing_paragraph for d in mpc)
    fuse = compiled.fuse.demos
    assert len(fuse) == 3 and all(d.evidence[0].startswith("Analysis: The paragraphs show") for d in fuse)
    assert {d.answer for d in fuse} == {"Vitznau", "1871", "Lake Lucerne"}  # the one-hop record is never used


def test_cor_under_mpc_gets_the_same_mpc_demos_and_none_without_its_writer(train):
    hotpot, _ = train
    lm, engine = _no_lm()
    with dspy.context(lm=lm):
        mpc = AnnotatedFewShot(k=3, seed=0).compile(build_program("cor", tree_retriever(), expansion="mpc"),
                                                    trainset=hotpot)
        cot = AnnotatedFewShot(k=3, seed=0).compile(build_program("cor", tree_retriever()), trainset=hotpot)
    assert engine.calls == []
    demos = mpc.complete_paragraph.demos
    assert len(demos) == 3 and all(d.missing_paragraph for d in demos)
    tor = AnnotatedFewShot(k=3, seed=0).compile(TreeOfReviews_(), trainset=hotpot)
    assert [d.toDict() for d in demos] == [d.toDict() for d in tor.complete_paragraph.demos]
    assert not hasattr(cot, "complete_paragraph") and cot.review.demos  # the CoT review writes its own queries


def TreeOfReviews_():
    return build_program("tor", tree_retriever())


def test_beam_gets_ask_demos_from_the_decomposition_and_score_demos_both_ways(train):
    hotpot, musique = train
    beam = build_program("beam", FakeRetriever(), preset="nq")
    compiled = AnnotatedFewShot(k=3).compile(beam, trainset=musique + hotpot)
    ask = compiled.ask.demos
    assert [d.sub_questions for d in ask] == [["Which lake does Weggis sit on?"], ["In which region is Lake Lucerne?"]]
    assert "Which lake does Weggis sit on?" in ask[1].history
    scores = sorted(d.confidence for d in compiled.scorer.demos)
    assert scores[0] == 0.1 and scores[-1] == 0.9
    assert all(d.evidence for d in compiled.summarize.demos) and all(d.answer for d in compiled.answer.demos)


def test_demos_are_seeded_and_survive_a_compiled_file(train, tmp_path):
    hotpot, _ = train
    first = AnnotatedFewShot(seed=1).compile(TreeOfReviews_(), trainset=hotpot)
    again = AnnotatedFewShot(seed=1).compile(TreeOfReviews_(), trainset=hotpot)
    assert first.dump_state() == again.dump_state()
    path = save_compiled(first, tmp_path / "c.json", name="tor", dataset="hotpotqa", retriever="dense")
    loaded = load_program(path, retriever=tree_retriever())
    assert [d["action"] for d in loaded.review.demos] == [d.action for d in first.review.demos]
    lm = generic_lm({"": "Vitznau"})
    with dspy.context(lm=lm):
        assert loaded(question="Where is Rigi Railways based?").answer == "Vitznau"
    prompts = [m["content"] for call in lm._engine_spec.calls for m in call.messages]
    assert any("The paragraphs show that the answer is" in p for p in prompts)  # the demos reach the prompts


def test_a_train_set_without_multi_hop_annotations_is_a_clear_error():
    ex = dspy.Example(id="q", question="q?", answers=["a"]).with_inputs("question")
    with pytest.raises(ValueError, match="annotated gold paragraphs"):
        AnnotatedFewShot().compile(build_program("direct"), trainset=[ex])


def test_optimize_with_the_annotated_optimizer_makes_no_compile_call(train, tmp_path, monkeypatch):
    import shutil

    from treeqa.optimize import OptimizeSpec, run_optimize
    from treeqa.settings import get_settings

    shutil.copy(FIXTURE_DATA / "hotpotqa" / "hotpot_dev_distractor_subset.json", get_settings().data_dir / "hotpotqa")
    lm = generic_lm({"Rigi Railway company": "Lake Zurich"})
    use_lm(monkeypatch, lm)
    spec = OptimizeSpec(program="tor", dataset="hotpotqa", optimizer="annotated", train=4, dev=2, retriever="bm25",
                        params={"widths": [2], "expansion": "direct"})
    report = run_optimize(spec, tmp_path / "O", echo=lambda *_: None)["report"]
    assert report["compile"]["lm_calls"] == 0 and report["plan"]["compile_max"] == 0
    assert report["compile"]["demos"] == {"review": 3, "fuse": 3}
    assert "compiled_vs_zero_shot" in report


def test_annotated_without_usable_train_questions_fails_before_any_evaluation(settings_env, tmp_path, monkeypatch):
    from treeqa.optimize import OptimizeSpec, run_optimize

    (tmp_path / "hotpotqa").mkdir()
    (tmp_path / "hotpotqa" / "hotpot_train_subset.json").write_text(json.dumps(RECORDS[3:]))  # one hop only
    (tmp_path / "hotpotqa" / "hotpot_dev_distractor_subset.json").write_text(
        (FIXTURE_DATA / "hotpotqa" / "hotpot_dev_distractor_subset.json").read_text())
    settings_env(data_dir=tmp_path, cache_dir=tmp_path / "cache")
    lm, engine = _no_lm()
    use_lm(monkeypatch, lm)
    with pytest.raises(ValueError, match="two or more annotated gold paragraphs"):
        run_optimize(OptimizeSpec(program="direct", optimizer="annotated", train=1, dev=1), tmp_path / "O",
                     echo=lambda *_: None)
    assert engine.calls == [] and not (tmp_path / "O" / "zero-shot").exists()


def test_the_beam_on_nq_compiles_from_musique_annotations(train, tmp_path, monkeypatch):
    """`--train-from musique`: NQ has no annotations, so the beam's Ask demos come from MuSiQue's
    decompositions, while both evaluations ask NQ questions over the NQ corpus."""
    import shutil

    from treeqa.optimize import OptimizeSpec, run_optimize
    from treeqa.settings import get_settings

    for rel in ("nq", "wikipedia"):
        shutil.copytree(FIXTURE_DATA / rel, get_settings().data_dir / rel)
    lm = generic_lm({"rigi railway": "Niklaus Riggenbach"})
    use_lm(monkeypatch, lm)
    spec = OptimizeSpec(program="beam", dataset="nq", preset="nq", optimizer="annotated", train_from="musique",
                        train=1, dev=1, retriever="bm25", params={"depth": 1})
    out = run_optimize(spec, tmp_path / "O", echo=lambda *_: None)
    report = out["report"]
    assert report["compile"]["train_dataset"] == "musique" and report["compile"]["lm_calls"] == 0
    assert report["splits"] == {"train": "train", "dev": "test"}
    assert report["compile"]["demos"]["ask"] == 2
    compiled = load_program(tmp_path / "O" / "compiled.json")
    assert compiled.ask.demos[0]["sub_questions"] == ["Which lake does Weggis sit on?"]
    assert report["compiled"]["n"] == 1 and "NQ-open.test.jsonl" in report["data"]["questions"]  # asked NQ test


def test_musique_relation_hops_become_questions_in_ask_demos(train):
    from treeqa.teleprompt.annotated_demos import as_question

    assert as_question("Hello Love >> performer") == "What is the performer of Hello Love?"
    assert as_question("Who was the first president of Wiley ?") == "Who was the first president of Wiley?"
    hotpot, musique = train
    example = musique[0].copy(annotation={**musique[0].annotation, "decomposition": [
        {"question": "Weggis >> located next to body of water", "answer": "Lake Lucerne"},
        {"question": "#1 >> located in region", "answer": "central Switzerland"}]})
    ask = AnnotatedFewShot(k=3).compile(build_program("beam", FakeRetriever(), preset="nq"), trainset=[example]).ask
    assert [d.sub_questions for d in ask.demos] == [["What is the located next to body of water of Weggis?"],
                                                    ["What is the located in region of Lake Lucerne?"]]


def test_train_from_refuses_a_compiler_that_would_search_the_train_questions():
    from treeqa.optimize import OptimizeSpec

    with pytest.raises(ValueError, match="bootstrap runs the program on the train questions, over the nq corpus"):
        OptimizeSpec(program="beam", dataset="nq", optimizer="annotated+bootstrap", train_from="musique")
    with pytest.raises(ValueError, match="unknown dataset 'squad'"):
        OptimizeSpec(program="beam", dataset="nq", optimizer="annotated", train_from="squad")
    assert OptimizeSpec(program="beam", dataset="nq", optimizer="path-judge", train_from="hotpotqa").train_from
    # the beam's default compile (path judge + the trained reader) reads no train question through the
    # program, so NQ's beam compiles from MuSiQue's annotations with it (the main command on NQ)
    default = OptimizeSpec(program="beam", dataset="nq", preset="nq", optimizer=None, train_from="musique")
    assert "trained-reader" in default.optimizer.split("+") and default.train_from == "musique"


def test_path_judge_on_a_beam_that_retrieves_nothing_is_refused_before_any_question():
    """The paper's TriviaQA and WebQ presets give the beam GENREAD evidence: no passage for a path
    judge to score, so the spec is refused up front (it used to fail only after the zero-shot run)."""
    from treeqa.optimize import OptimizeSpec

    for preset in ("triviaqa", "webq"):
        with pytest.raises(ValueError, match=f"beam --preset {preset} with evidence=genread it retrieves no passages"):
            OptimizeSpec(program="beam", dataset=preset, preset=preset, optimizer="path-judge", train_from="musique")
        with pytest.raises(ValueError, match="retrieves no passages"):
            OptimizeSpec(program="beam", dataset=preset, preset=preset, optimizer="path-judge+reader")
        retrieving = OptimizeSpec(program="beam", dataset=preset, preset=preset, optimizer="path-judge",
                                  train_from="musique", params={"evidence": "retrieval"})
        assert retrieving.params == {"evidence": "retrieval"}
        assert OptimizeSpec(program="beam", dataset=preset, preset=preset, optimizer="annotated", train_from="musique")
