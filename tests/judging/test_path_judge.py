"""The path judge: features, training paths from the annotations, the fit, and ToR decided by it."""

import dspy
import numpy as np
import pytest

from tests.fakes import BeamScript, FakeRetriever, answering, hashing_embed, review, run, scripted_lm
from treeqa.data.passage import Passage
from treeqa.judging.path_judge import FEATURES, Logit, PathJudge, path_features
from treeqa.programs import build_program
from treeqa.programs.compiled import load_program, save_compiled
from treeqa.programs.review_base import concat_query
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.teleprompt.path_judge_fit import PathJudgeFit, fit_path_judge, judge_cases
from treeqa.teleprompt.thresholds import recall_threshold

QUESTION = "Where was the author of Alpha born?"
ALPHA = Passage("alpha", "Alpha (novel)", "Alpha is a novel written by Beta Smith.")
BETA = Passage("beta", "Beta Smith", "Beta Smith was born in Gamma.")
NOISE = [Passage(f"noise{i}", f"Noise {i}", f"Noise {i} is about something else.") for i in range(1, 4)]
MISSING = "Beta Smith was born in a town."  # what the scripted MPC writes: the query for the second hop


def _logit(intercept=0.0, threshold=0.5, **weights):
    """A judge decision on raw features (mean 0, scale 1) with the given weights."""
    assert set(weights) <= set(FEATURES)
    n = len(FEATURES)
    return Logit(mean=[0.0] * n, scale=[1.0] * n, coef=[weights.get(f, 0.0) for f in FEATURES],
                 intercept=intercept, threshold=threshold)


# relevant: the paragraph is named in the question or linked to the path; sufficient: two paragraphs
JUDGE = PathJudge(relevance=_logit(-5, title_in_question=10, linked=10), sufficiency=_logit(-15, paragraphs=10))


def test_features_of_a_two_paragraph_path():
    vectors = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0]], dtype=np.float32)  # question, Alpha, Beta
    x = dict(zip(FEATURES, path_features(QUESTION, [ALPHA, BETA], vectors), strict=True))
    assert x["question_similarity"] == pytest.approx(0.6)  # Beta against the question
    assert x["path_similarity"] == pytest.approx(0.3 / np.sqrt(0.9))  # the mean of both
    assert x["title_in_question"] == 0.0  # "Beta Smith" is not named in the question
    assert x["titles_in_question"] == 0.5  # "Alpha (novel)" is, without its qualifier
    assert x["linked"] == 1.0  # Alpha's text names Beta Smith
    # content words of the question: where, author, alpha, born; the path has alpha and born
    assert x["coverage"] == 0.5 and x["coverage_gain"] == 0.25
    assert x["paragraphs"] == 2.0
    with pytest.raises(ValueError, match="at least one paragraph"):
        path_features(QUESTION, [], vectors[:1])


def test_training_paths_from_the_annotations(train):
    hotpot, _ = train
    cases = judge_cases(hotpot)
    # three usable questions (the one-hop record is skipped) with one, two and one distractors:
    # 4 gold paths each, 3 per distractor, 2 longer paths with a distractor, 2 with two distractors
    assert len(cases) == 9 + 14 + 9
    assert sum(c[2] for c in cases) == 23 and sum(c[3] for c in cases) == 12
    for question, path, relevant, sufficient in cases:
        source = next(ex for ex in hotpot if ex.question == question)
        gold = {p["title"] for p in source.annotation["gold"]}
        assert relevant == (path[-1].title in gold)
        assert sufficient == (gold <= {p.title for p in path})
    assert {len(path) for _, path, _, _ in cases} == {1, 2, 3}  # length alone decides nothing
    assert judge_cases(hotpot, seed=3) == judge_cases(hotpot, seed=3)


def test_the_fit_is_plain_numbers_that_round_trip(train):
    hotpot, _ = train
    judge, figures = fit_path_judge(hotpot, hashing_embed)
    assert {k: figures[k] for k in ("cases", "relevant", "sufficient")} == {"cases": 32, "relevant": 23,
                                                                           "sufficient": 12}
    assert 0.0 <= figures["relevance_auc_cv"] <= 1.0 and 0.0 <= figures["sufficiency_threshold"] <= 1.0
    again = PathJudge.model_validate(judge.model_dump())
    assert again == judge
    p_relevant, p_sufficient = again.probabilities(QUESTION, [ALPHA, BETA], hashing_embed)
    assert 0.0 < p_relevant < 1.0 and 0.0 < p_sufficient < 1.0


def test_no_annotated_question_is_a_clear_error(train):
    hotpot, _ = train
    with pytest.raises(ValueError, match="two or more annotated gold"):
        fit_path_judge([ex for ex in hotpot if ex.id == "t4"], hashing_embed)


def test_a_judge_of_other_features_or_shapes_is_refused():
    dumped = JUDGE.model_dump()
    with pytest.raises(ValueError, match="compile it again"):
        PathJudge.model_validate({**dumped, "features": ["question_similarity"]})
    short = {**dumped["relevance"], "coef": [1.0]}
    with pytest.raises(ValueError, match="weights"):
        PathJudge.model_validate({**dumped, "relevance": short})
    with pytest.raises(ValueError, match="not a usable judge"):
        TreeOfReviews(FakeRetriever(), path_judge={**dumped, "relevance": short})
    with pytest.raises(ValueError, match="not both"):
        TreeOfReviews(FakeRetriever(), path_judge=dumped, relevance_threshold=0.5)


def test_relevance_is_cut_to_keep_the_asked_share_of_gold():
    scores, labels = [0.9, 0.8, 0.7, 0.6, 0.1], [True, True, False, True, False]
    assert recall_threshold(scores, labels, 1.0) == 0.6
    assert recall_threshold(scores, labels, 2 / 3) == 0.8
    assert recall_threshold(scores, labels, 0.5) == 0.8  # two of three, at least half
    with pytest.raises(ValueError, match="min_recall"):
        recall_threshold(scores, labels, 0.0)


def _tree(expansion="mpc", query_for_beta=MISSING, fusion="evidence"):
    retriever = FakeRetriever("counter", {QUESTION: [ALPHA, *NOISE[:2]], query_for_beta: [BETA, NOISE[2]]})
    return TreeOfReviews(retriever, expansion=expansion, fusion=fusion, path_judge=JUDGE.model_dump()), retriever


def _actions(pred):
    return {n["title"]: n["action"] for n in pred.tree["nodes"] if n.get("title")}


def test_the_judge_decides_and_the_model_is_asked_only_for_what_the_action_needs():
    program, retriever = _tree()
    # the model would search on every path; the judge accepts the linked pair without its analysis
    script = answering(lambda call: review("search", next_query="more"), answer="Gamma",
                       missing=lambda call: MISSING)
    pred, engine = run(program, script, question=QUESTION)
    assert [c.kind for c in engine.calls] == ["complete", "review", "fuse"]  # MPC for Alpha, Beta's analysis
    assert engine.calls[1].titles == ["Alpha (novel)", "Beta Smith"]
    assert _actions(pred) == {"Alpha (novel)": "search", "Noise 1": "reject", "Noise 2": "reject",
                              "Beta Smith": "accept", "Noise 3": "reject"}
    assert pred.stats["judge_only"] == 4  # Alpha's search and the three rejects cost no review
    assert pred.stats["evidence"] == 1 and pred.answer == "Gamma"
    assert retriever.asked[1] == MISSING
    beta = next(n for n in pred.tree["nodes"] if n.get("title") == "Beta Smith")
    assert beta["judge_relevant"] > 0.99 and beta["judge_sufficient"] > 0.99


@pytest.mark.parametrize("fusion", ["paragraph", "passages"])
def test_a_paragraph_reader_needs_no_analysis_so_an_accept_costs_no_review(fusion):
    program, _ = _tree(fusion=fusion)
    script = answering(lambda call: review("search", next_query="more"), answer="Gamma",
                       missing=lambda call: MISSING)
    pred, engine = run(program, script, question=QUESTION)
    assert [c.kind for c in engine.calls] == ["complete", "fuse"]  # the MPC for Alpha, the reader
    assert _actions(pred)["Beta Smith"] == "accept" and pred.stats["judge_only"] == 5
    assert pred.stats["evidence"] == 1 and pred.stats["fused_from"] == "evidence" and pred.answer == "Gamma"
    assert "Beta Smith" in str(engine.calls[-1].inputs) and "Alpha (novel)" in str(engine.calls[-1].inputs)


def test_with_direct_expansion_the_review_writes_the_query():
    program, retriever = _tree(expansion="direct", query_for_beta="Beta Smith birthplace")
    script = answering(lambda call: review("search", next_query="Beta Smith birthplace"), answer="Gamma")
    pred, engine = run(program, script, question=QUESTION)
    assert [c.kind for c in engine.calls] == ["review", "review", "fuse"]
    assert retriever.asked[1] == "Beta Smith birthplace" and _actions(pred)["Beta Smith"] == "accept"
    assert pred.stats["judge_only"] == 3


def test_with_concat_expansion_a_search_costs_no_lm_call():
    query = f"{QUESTION} Alpha (novel): Alpha is a novel written by Beta Smith."
    program, retriever = _tree(expansion="concat", query_for_beta=query, fusion="passages")
    script = answering(lambda call: review("search", next_query="more"), answer="Gamma")
    pred, engine = run(program, script, question=QUESTION)
    assert [c.kind for c in engine.calls] == ["fuse"]  # the judge decides, the path makes the query
    assert retriever.asked[1] == query and _actions(pred)["Beta Smith"] == "accept"
    assert pred.stats["judge_only"] == 5 and pred.stats["completions"] == 0 and pred.answer == "Gamma"


def test_with_linked_expansion_the_paragraphs_a_path_names_come_first_and_cost_no_lm_call():
    query = f"{QUESTION} Alpha (novel): Alpha is a novel written by Beta Smith."
    program, retriever = _tree(expansion="linked", fusion="passages")
    retriever.fixed[query] = [NOISE[2], ALPHA, NOISE[0]]  # the dense search alone misses Beta
    retriever.passages = [ALPHA, BETA, *NOISE]
    pred, engine = run(program, answering(lambda call: review("search"), answer="Gamma"), question=QUESTION)
    assert [c.kind for c in engine.calls] == ["fuse"]
    assert retriever.asked[1] == query and _actions(pred)["Beta Smith"] == "accept"
    assert pred.stats["linked"] == 1 and pred.answer == "Gamma"



def test_with_bridge_expansion_the_named_entity_is_searched_and_a_title_link_keeps_the_last_place():
    named = f"Beta Smith {QUESTION}"
    program, retriever = _tree(expansion="bridge", fusion="passages")
    retriever.fixed[named] = [NOISE[2], NOISE[0], NOISE[1], ALPHA]  # the name's search misses Beta
    retriever.passages = [ALPHA, BETA, *NOISE]
    script = answering(lambda call: review("search"), answer="Gamma", bridge=lambda call: "Beta Smith.")
    pred, engine = run(program, script, question=QUESTION)
    assert [c.kind for c in engine.calls] == ["bridge", "fuse"]  # one naming, for Alpha's search
    assert engine.calls[0].titles == ["Alpha (novel)"]
    assert retriever.asked[1] == named  # the name (cleaned) first, then the question
    below = [n["title"] for n in pred.tree["nodes"] if n.get("parent") == 1]
    assert below == ["Noise 3", "Noise 1", "Beta Smith"]  # the name's hits, then the link in the last place
    assert _actions(pred)["Beta Smith"] == "accept" and pred.answer == "Gamma"
    assert pred.stats["bridges"] == 1 and pred.stats["linked"] == 1 and pred.stats["bridge_failures"] == 0
    alpha = next(n for n in pred.tree["nodes"] if n.get("title") == "Alpha (novel)")
    assert alpha["query"] == named


def test_a_bridge_naming_that_fails_or_names_nothing_searches_as_linked_does_and_is_counted():
    concat = f"{QUESTION} Alpha (novel): Alpha is a novel written by Beta Smith."
    for reply in (RuntimeError("engine down"), "none"):
        program, retriever = _tree(expansion="bridge", query_for_beta=concat, fusion="passages")
        retriever.passages = [ALPHA, BETA, *NOISE]
        pred, engine = run(program, answering(lambda call: review("search"), answer="Gamma",
                                              bridge=lambda call, r=reply: r), question=QUESTION)
        assert retriever.asked[1] == concat and _actions(pred)["Beta Smith"] == "accept"
        assert pred.stats["bridges"] == 1 and pred.stats["bridge_failures"] == 1 and pred.answer == "Gamma"
        assert any(f["where"] == "expand@node1:bridge" for f in pred.failures) == isinstance(reply, Exception)

def test_without_passages_to_link_the_search_keeps_its_own_hits_and_says_so():
    query = f"{QUESTION} Alpha (novel): Alpha is a novel written by Beta Smith."
    program, retriever = _tree(expansion="linked", query_for_beta=query, fusion="passages")
    pred, _ = run(program, answering(lambda call: review("search"), answer="Gamma"), question=QUESTION)
    assert _actions(pred)["Beta Smith"] == "accept" and pred.stats["linked"] == 0
    assert any(f["where"].endswith(":links") for f in pred.failures)


def test_a_concat_query_keeps_the_question_and_cuts_the_paragraph():
    assert concat_query(QUESTION, BETA, 40) == f"{QUESTION} Beta"[:40]
    assert concat_query(QUESTION, BETA, 5) == QUESTION  # the question itself is never cut
    assert TreeOfReviews.no_query_writer({"expansion": "concat", "widths": (5, 3), "depth": None}).startswith(
        "makes its queries without the LM")


def test_without_the_encoder_the_reviews_decide_and_the_failure_is_recorded(monkeypatch):
    def broken(texts):
        raise RuntimeError("no encoder")

    monkeypatch.setattr("treeqa.programs.judged.default_embed", broken)
    monkeypatch.setattr("treeqa.programs.review_run.default_embed", broken)
    program, _ = _tree()
    pred, engine = run(program, answering(lambda call: review("reject")), question=QUESTION)
    assert [c.kind for c in engine.calls] == ["review"] * 3 + ["fuse"]
    assert any(f["where"].endswith(":judge") for f in pred.failures)


def test_the_optimizer_fits_the_judge_without_lm_calls_and_it_is_saved(train, tmp_path):
    # the judge is fitted on the stand-in encoder (conftest's autouse fixture): no MiniLM
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call"))
    with dspy.context(lm=lm):
        compiled = PathJudgeFit(k=3).compile(build_program("tor", FakeRetriever()), trainset=hotpot)
    assert engine.calls == []
    assert compiled.judge_fit["cases"] == 32 and len(compiled.review.demos) == 3
    path = save_compiled(compiled, tmp_path / "c.json", name="tor", dataset="hotpotqa", retriever="dense")
    loaded = load_program(path, retriever=FakeRetriever())
    assert PathJudge.model_validate(loaded.path_judge) == PathJudge.model_validate(compiled.path_judge)
    with pytest.raises(ValueError, match="no path judge"):
        PathJudgeFit().compile(build_program("rta", FakeRetriever()), trainset=hotpot)


def test_dspy_s_own_load_restores_the_judge_or_refuses_loudly(tmp_path):
    """What an app written for DSPy does: build the program, then `Module.load` the file."""
    from treeqa.programs import BeamSearchQA

    judged = build_program("tor", FakeRetriever(), path_judge=JUDGE.model_dump())
    judged.review.demos = [dspy.Example(question="q", paragraphs=["p"], relevant=True, sufficient=False,
                                        action="search", next_query="n", analysis="")]
    path = save_compiled(judged, tmp_path / "c.json", name="tor", dataset="hotpotqa", retriever="dense")
    fresh = TreeOfReviews(FakeRetriever())
    fresh.load(str(path))  # DSPy's Module.load, not treeqa.programs.compiled.load_program
    assert PathJudge.model_validate(fresh.path_judge) == JUDGE and len(fresh.review.demos) == 1
    plain = tmp_path / "plain.json"
    judged.save(str(plain))  # DSPy's own save keeps the settings too
    again = TreeOfReviews(FakeRetriever())
    again.load(str(plain))
    assert PathJudge.model_validate(again.path_judge) == JUDGE
    with pytest.raises(ValueError, match=r"other settings: hops=1 \(this TreeOfReviews has 2\)"):
        TreeOfReviews(FakeRetriever(), hops=2).load(str(path))
    thresholded = TreeOfReviews(FakeRetriever(), relevance_threshold=0.5)
    thresholded.load(str(path))  # fitted settings come from the file, all of them
    assert thresholded.relevance_threshold is None and thresholded.path_judge is not None
    beam = build_program("beam", FakeRetriever(), preset="nq", path_judge=JUDGE.model_dump())
    beam.save(str(tmp_path / "beam.json"))
    fresh_beam = BeamSearchQA(FakeRetriever(), **{k: v for k, v in beam.method_settings.items() if k != "path_judge"})
    fresh_beam.load(str(tmp_path / "beam.json"))
    assert PathJudge.model_validate(fresh_beam.path_judge) == JUDGE


def test_the_optimize_spec_names_the_programs_with_a_judge_and_plans_no_compile_call():
    from treeqa.optimize import OptimizeSpec, plan

    with pytest.raises(ValueError, match="programs it fits: beam, tor"):
        OptimizeSpec(program="direct", optimizer="path-judge")
    assert plan(OptimizeSpec(program="tor", optimizer="path-judge", train=5, dev=2))["compile_max"] == 0
    assert plan(OptimizeSpec(program="beam", optimizer="path-judge", train=5, dev=2))["compile_max"] == 0


# --- the beam search judged -----------------------------------------------------------------

# sufficient: some paragraph of the path names another (Alpha names Beta Smith)
LINKED = PathJudge(relevance=_logit(-5, linked=10), sufficiency=_logit(-5, linked=10))


def _beam(script=None, **settings):
    """ALPHA and a noise paragraph for the question; BETA behind the sub-question "beta query"."""
    def scripted(p):  # the beam script names a state's evidence after its first passage's text
        return Passage(p.id, p.title, f"text 1 about {p.text}")

    fixed = {QUESTION: [scripted(ALPHA), scripted(NOISE[0])], "beta query": [scripted(BETA), scripted(NOISE[1])]}
    retriever = FakeRetriever(fixed=fixed)
    program = build_program("beam", retriever, preset="nq", path_judge=LINKED.model_dump(), **settings)
    lm, engine = scripted_lm(script or BeamScript(asks={QUESTION: ["beta query", "other query"]}))
    with dspy.context(lm=lm):
        pred = program(question=QUESTION)
    return pred, engine


def test_a_judged_beam_ranks_states_by_their_passages_and_stops_at_the_judge_cut():
    pred, engine = _beam(embed_fn=hashing_embed)
    assert "confidence" not in engine.kinds()  # the judge scores every state: no Score call
    # seeds: the question's evidence; one round: 2 asks, 4 evidences; then the one state that answers is read
    assert len(engine.calls) == 1 + 2 + 4 + 1 and engine.kinds().count("answer") == 1
    assert pred.tree["stop"] == "threshold" and len(pred.tree["beams"]) == 2
    by = {(s["sub_questions"] or ["root"])[-1]: s for s in pred.tree["states"]}
    assert by["root"]["confidence"] == 0.0 and by["root"]["judge_path"] == []  # no passages behind it
    assert by[QUESTION]["confidence"] < 0.01  # Alpha and noise: nothing links them
    # below the question's seed, Beta joins Alpha: the linked pair is judged sufficient
    assert by["beta query"]["judge_path"] == ["alpha", "beta"] and by["beta query"]["confidence"] > 0.99
    assert by["root2"]["confidence"] < 0.01  # its own two passages only, not the seed's
    assert pred.answer == "ans:beta query" and pred.tree["beams"][1][0] == by["beta query"]["id"]
    assert [s["answer"] for s in pred.tree["states"] if s is not by["beta query"]] == [None] * 5  # never read


def test_a_judged_beam_whose_best_state_fails_to_read_answers_from_the_next():
    # the best state's reading fails; the next of the last beam answers, and the failure is recorded
    script = BeamScript(asks={QUESTION: ["beta query", "other query"]}, fail=[("answer", "beta query")])
    pred, engine = _beam(embed_fn=hashing_embed, script=script)
    by = {(s["sub_questions"] or ["root"])[-1]: s for s in pred.tree["states"]}
    assert by["beta query"]["status"] == "failed" and by["beta query"]["answer"] is None
    best = pred.tree["states"][pred.tree["best"]]
    assert best["id"] == pred.tree["beams"][1][1]
    assert pred.answer == best["answer"] == f"ans:{best['sub_questions'][-1]}"
    assert engine.kinds().count("answer") == 2 and any(f["where"].endswith(".answer") for f in pred.failures)


def test_a_judged_beam_that_votes_reads_every_state():
    pred, engine = _beam(embed_fn=hashing_embed, pick="vote")
    assert engine.kinds().count("answer") == len(pred.tree["states"])
    assert all(isinstance(s["answer"], str) for s in pred.tree["states"])


def test_without_the_encoder_score_decides_and_the_failure_is_recorded():
    def broken(texts):
        raise RuntimeError("no encoder")

    pred, engine = _beam(embed_fn=broken)
    # every state with passages behind it falls back to Score; the seed without any is judged 0 unembedded
    with_passages = sum(bool(s["passages"]) or s["parent"] is not None for s in pred.tree["states"])
    assert with_passages == len(pred.tree["states"]) - 1
    assert engine.kinds().count("confidence") == with_passages
    assert sum(f["where"].endswith(".judge") for f in pred.failures) == with_passages
    assert pred.tree["states"][0]["confidence"] == 0.0


def test_a_judge_needs_retrieved_passages():
    with pytest.raises(ValueError, match="evidence='retrieval'"):
        build_program("beam", preset="triviaqa", path_judge=LINKED.model_dump())
    with pytest.raises(ValueError, match="not a usable judge"):
        build_program("beam", FakeRetriever(), path_judge={"relevance": {}})


def test_the_optimizer_compiles_a_judged_beam_that_is_saved(train, tmp_path):
    # the judge is fitted on the stand-in encoder (conftest's autouse fixture): no MiniLM
    hotpot, _ = train
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call"))
    with dspy.context(lm=lm):
        compiled = PathJudgeFit(k=3).compile(build_program("beam", FakeRetriever(), preset="nq"), trainset=hotpot)
    assert engine.calls == [] and compiled.judge_fit["cases"] == 32
    path = save_compiled(compiled, tmp_path / "c.json", name="beam", dataset="hotpotqa", retriever="dense")
    loaded = load_program(path, retriever=FakeRetriever())
    assert PathJudge.model_validate(loaded.path_judge) == PathJudge.model_validate(compiled.path_judge)
    assert loaded.depth == 2 and loaded.passages == 2  # the preset's settings travel with it


# benchmarks/faults.md, second round #3: compiled files: finite numbers, bounded size

def test_3_a_judge_with_non_finite_weights_is_refused():
    from treeqa.judging.path_judge import FEATURES, check_path_judge

    logit = {"mean": [0.0] * len(FEATURES), "scale": [1.0] * len(FEATURES), "coef": [0.1] * len(FEATURES),
             "intercept": 0.0, "threshold": 0.5}
    check_path_judge({"relevance": logit, "sufficiency": logit})  # a finite judge loads
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            check_path_judge({"relevance": {**logit, "coef": [bad] * len(FEATURES)}, "sufficiency": logit})
