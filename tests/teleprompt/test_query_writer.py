import json
import shutil

import dspy
import pytest

from tests.fakes import FIXTURE_DATA, FakeRetriever, answering, passage, review, review_kind, scripted_lm, use_lm
from treeqa.judging.path_judge import PathJudge
from treeqa.optimize import OptimizeSpec, compile_call_bound, plan, run_optimize, stages
from treeqa.programs import TreeOfReviews, build_program
from treeqa.programs.compiled import load_program
from treeqa.teleprompt.annotated_demos import as_passage
from treeqa.teleprompt.path_judge_fit import PathJudgeFit
from treeqa.teleprompt.query_writer import QueryWriterFit, RetrievalHit, query_examples

NOISE = [passage(f"Noise {i}") for i in range(4)]


def gold_of(train) -> dict[str, object]:
    """Title -> the gold Passage of every annotated train question (as the corpus holds it)."""
    return {p["title"]: as_passage(p) for ex in train if ex.get("annotation") for p in ex.annotation["gold"]}


def other_gold(train) -> dict[str, str]:
    """Title of a two-hop question's gold paragraph -> the other one's title."""
    out = {}
    for ex in train:
        gold = [p["title"] for p in (ex.get("annotation") or {}).get("gold") or []]
        if len(gold) == 2:
            out.update({gold[0]: gold[1], gold[1]: gold[0]})
    return out


def title_retriever(train) -> FakeRetriever:
    """Searching a gold paragraph's title finds it, after two noise paragraphs."""
    return FakeRetriever(fixed={title: [NOISE[0], NOISE[1], p] for title, p in gold_of(train).items()})


def writer(train, right=lambda call: False):
    """An MPC writer that names the missing paragraph's title for the Rigi Railways path, and for
    the others only where `right(call)` says so (else something no search finds)."""
    missing = other_gold(train)

    def complete(call) -> str:
        first = call.titles[0]
        if first in missing and (first == "Rigi Railways" or right(call)):
            return missing[first]
        return "a paragraph nobody indexed"

    return scripted_lm(answering(lambda call: review("reject"), missing=complete), classify=review_kind,
                       whole_call=True)


def test_the_paths_come_from_the_annotations_in_both_orders(train):
    hotpot, _ = train
    program = build_program("tor", FakeRetriever())
    examples = query_examples(program, hotpot)
    assert len(examples) == 6  # three two-hop questions, two orders each; the one-hop question gives none
    gold = gold_of(hotpot)
    first, second = examples[0], examples[1]
    assert first.path == [gold["Rigi Railways"]] and first.missing_ids == [gold["Vitznau"].id]
    assert second.path == [gold["Vitznau"]] and second.missing_ids == [gold["Rigi Railways"].id]
    (question,) = [ex for ex in hotpot if ex.id == "t1"]
    assert first.missing_ids[0] in question.gold_ids  # the ids recall@15 counts
    assert first.inputs().toDict() == program.completion_inputs(question.question, [gold["Rigi Railways"]])


def test_a_train_set_without_annotated_paths_is_refused_before_any_call(train):
    hotpot, _ = train
    one_hop = [ex for ex in hotpot if ex.id == "t4"]
    lm, engine = scripted_lm(lambda kind, inputs: AssertionError("no LM call"))
    with dspy.context(lm=lm), pytest.raises(ValueError, match="two or more annotated gold paragraphs"):
        QueryWriterFit().compile(build_program("tor", FakeRetriever()), trainset=one_hop)
    assert engine.calls == []


def test_a_hit_is_a_missing_gold_paragraph_among_the_searched_children(train):
    hotpot, _ = train
    gold = gold_of(hotpot)
    rigi, vitznau = gold["Rigi Railways"], gold["Vitznau"]
    retriever = FakeRetriever(fixed={
        "Vitznau is": [NOISE[0], vitznau],  # the cut query finds the missing paragraph
        "already": [rigi, NOISE[0]],  # only the paragraph on the path: no hit
        "too deep": [*NOISE[:3], vitznau],  # past the three children a depth-2 search keeps
        "past path": [rigi, *NOISE[:2], vitznau],  # the path's own paragraph takes no child's place
    })
    program = build_program("tor", retriever, max_query_chars=10)
    example = query_examples(program, hotpot)[0]
    hit = RetrievalHit(program)

    def score(text):
        return hit(example, dspy.Prediction(missing_paragraph=text))

    assert score("Vitznau is a village on Lake Lucerne.") == 1.0  # cut to 10 characters, as at question time
    assert retriever.queries[-1] == ("Vitznau is", 3 + 1)  # widths[1] children, past the one on the path
    assert score("already") == 0.0
    assert score("too deep") == 0.0
    assert score("past path") == 1.0
    asked = len(retriever.queries)
    assert score("None") == 0.0 and len(retriever.queries) == asked  # no paragraph written: nothing searched
    vitznau_path = query_examples(program, hotpot)[1]  # the other order: Rigi Railways is what is missing
    assert hit(vitznau_path, dspy.Prediction(missing_paragraph="already")) == 1.0


def test_a_bootstrapped_writer_that_finds_more_replaces_the_prepared_one(train):
    hotpot, _ = train
    lm, engine = writer(hotpot, right=lambda call: len(call.messages) > 2)  # right with any demo shown
    with dspy.context(lm=lm):
        compiled = QueryWriterFit(candidates=1).compile(build_program("tor", title_retriever(hotpot)),
                                                        trainset=hotpot)
    assert compiled.query_fit == {"writer": "complete_paragraph", "examples": 6, "width": 3,
                                  "prepared_hit_rate": 16.7, "compiled_hit_rate": 100.0, "kept": "compiled",
                                  "demos": 1}
    (demo,) = compiled.complete_paragraph.demos  # the path it got right, with its own query
    assert demo["missing_paragraph"] == "Vitznau" and demo["paragraphs"][0].startswith("Rigi Railways:")


def test_a_prepared_writer_that_finds_more_than_every_candidate_is_kept(train):
    hotpot, _ = train
    lm, engine = writer(hotpot, right=lambda call: "HINT" in json.dumps(call.messages))
    program = build_program("tor", title_retriever(hotpot))
    hint = dspy.Example(question="HINT", paragraphs=["HINT"], missing_paragraph="HINT")
    program.complete_paragraph.demos = [hint]
    with dspy.context(lm=lm):
        compiled = QueryWriterFit(candidates=1).compile(program, trainset=hotpot)
    fit = compiled.query_fit
    assert (fit["prepared_hit_rate"], fit["kept"]) == (100.0, "prepared") and fit["compiled_hit_rate"] < 100.0
    assert compiled.complete_paragraph.demos == [hint] and program.complete_paragraph.demos == [hint]


def test_the_compile_makes_the_calls_its_bound_allows_and_a_rerun_replays_them(train, tmp_path):
    """The prepared writer and the zero-shot one on every path, then each bootstrapped demo set
    (here two distinct ones) on every path: the bound; bootstrapping replays the prepared writer."""
    hotpot, _ = train
    log = tmp_path / "query-calls.jsonl"

    def compile_with(lm):
        program = build_program("tor", title_retriever(hotpot))
        program.complete_paragraph.demos = [dspy.Example(question="HINT", paragraphs=["HINT"],
                                                         missing_paragraph="HINT")]
        with dspy.context(lm=lm):
            return QueryWriterFit(calls_path=log, max_demos=2, candidates=1).compile(program, trainset=hotpot)

    lm, engine = writer(hotpot, right=lambda call: "HINT" in json.dumps(call.messages)
                        or call.titles[0] in ("Vitznau", "Weggis"))
    compile_with(lm)
    tuning = OptimizeSpec(program="tor", optimizer="query").tuning() | {"candidates": 1}
    assert len(engine.calls) == 6 * (1 + 3) == compile_call_bound("query", 86, 3, tuning)  # 3 two-hop questions
    assert len(log.read_text().splitlines()) == len(engine.calls)
    again, replay = writer(hotpot)
    compile_with(again)
    assert replay.calls == []


def test_settings_where_no_predictor_writes_the_query_are_refused(train):
    with pytest.raises(ValueError, match="expansion=cot; only expansion=mpc"):
        OptimizeSpec(program="tor", optimizer="query", params={"expansion": "cot"})
    with pytest.raises(ValueError, match="expansion=cot; only expansion=mpc"):
        OptimizeSpec(program="cor", optimizer="annotated+query")  # CoR's default is the paper's CoT review
    with pytest.raises(ValueError, match="never searches below the first level"):
        OptimizeSpec(program="tor", optimizer="query", params={"widths": [5]})
    with pytest.raises(ValueError, match="rta declares no query writer"):
        OptimizeSpec(program="rta", optimizer="query")
    OptimizeSpec(program="cor", optimizer="annotated+query", params={"expansion": "mpc"})
    hotpot, _ = train
    with pytest.raises(ValueError, match="TreeOfReviews writes its queries inside the review"):
        QueryWriterFit().compile(build_program("tor", FakeRetriever(), expansion="cot"), trainset=hotpot)


def test_composed_with_the_path_judge_the_judge_stays_and_the_demos_load_back(train, tmp_path, monkeypatch):
    hotpot, _ = train
    shutil.copy(FIXTURE_DATA / "hotpotqa" / "hotpot_dev_distractor_subset.json", tmp_path / "hotpotqa")
    lm, _ = writer(hotpot, right=lambda call: len(call.messages) > 2)
    use_lm(monkeypatch, lm)
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: title_retriever(hotpot))
    spec = OptimizeSpec(program="tor", dataset="hotpotqa", optimizer="path-judge+query", train=4, dev=1,
                        candidates=1, max_demos=1)
    assert stages(spec.optimizer) == ["path-judge", "query"]
    assert plan(spec)["compile_max"] == 0 + 2 * 4 * (1 + 3)
    run_optimize(spec, tmp_path / "O")
    saved = json.loads((tmp_path / "O" / "compiled.json").read_text())
    fit = saved["treeqa"]["compile"]
    assert fit["query_fit"]["examples"] == 6 and "judge_fit" in fit
    assert saved["treeqa"]["settings"]["path_judge"] is not None  # the judge is still in place
    assert (tmp_path / "O" / "query-calls.jsonl").is_file()
    demos = saved["complete_paragraph"]["demos"]
    assert demos and len(saved["review"]["demos"]) == 3  # the annotated review demos stay as prepared

    loaded = load_program(tmp_path / "O" / "compiled.json", retriever=FakeRetriever())
    judge = PathJudge.model_validate(saved["treeqa"]["settings"]["path_judge"])
    assert [dict(d) for d in loaded.complete_paragraph.demos] == demos
    assert PathJudge.model_validate(loaded.path_judge) == judge
    fresh = TreeOfReviews(FakeRetriever())  # what an app written for DSPy does
    fresh.load(str(tmp_path / "O" / "compiled.json"))
    assert [dict(d) for d in fresh.complete_paragraph.demos] == demos
    assert PathJudge.model_validate(fresh.path_judge) == judge


def test_a_judged_program_keeps_its_judge_through_the_query_compile(train):
    hotpot, _ = train
    judged = PathJudgeFit(k=3).compile(build_program("tor", title_retriever(hotpot)), trainset=hotpot)
    lm, _ = writer(hotpot)
    with dspy.context(lm=lm):
        compiled = QueryWriterFit(candidates=1).compile(judged, trainset=hotpot)
    assert compiled.path_judge == judged.path_judge and compiled.review.demos == judged.review.demos


# --- the beam: Ask's sub-questions are the searches (evidence="retrieval") ------------------------

def beam_asker(train, right=lambda call: False, restate=False):
    """Ask, scripted: for the Rigi Railways path (and others where `right(call)`) a sub-question
    that names the missing paragraph's title; else one no search finds. With `restate`, the
    question itself comes first (the beam never searches it again)."""
    missing = other_gold(train)

    def respond(call):
        assert call.kind == "sub_questions", call.kind
        on_path = next(t for t in missing if f"Evidence: {t}:" in call.inputs["history"])
        asked = [missing[on_path] if on_path == "Rigi Railways" or right(call) else "what nobody indexed"]
        if restate:
            asked.insert(0, call.inputs["question"])
        return {"sub_questions": json.dumps(asked)}

    return scripted_lm(respond, whole_call=True)


def first_retriever(train) -> FakeRetriever:
    """Searching a gold paragraph's title finds it first, then a noise paragraph."""
    return FakeRetriever(fixed={title: [p, NOISE[0]] for title, p in gold_of(train).items()})


def test_the_beams_ask_is_compiled_on_the_state_the_evidence_seed_becomes(train):
    hotpot, _ = train
    program = build_program("beam", FakeRetriever(), preset="nq")
    examples = query_examples(program, hotpot)
    gold = gold_of(hotpot)
    assert len(examples) == 6 and examples[0].path == [gold["Rigi Railways"]]
    inputs = examples[0].inputs().toDict()
    (question,) = [ex.question for ex in hotpot if ex.id == "t1"]
    assert inputs["question"] == question and inputs["max_questions"] == 2
    assert inputs["history"].startswith(f"[1] Query: {question}\n    Evidence: Rigi Railways: ")


def test_a_beam_hit_is_a_new_sub_question_whose_passages_hold_a_missing_gold_paragraph(train):
    hotpot, _ = train
    gold = gold_of(hotpot)
    example = None
    retriever = first_retriever(hotpot)
    program = build_program("beam", retriever, preset="nq")
    example = query_examples(program, hotpot)[0]  # Rigi Railways on the path, Vitznau missing
    retriever.fixed[example.question] = [gold["Vitznau"]]  # the question itself would find it
    retriever.fixed["deep"] = [NOISE[0], NOISE[1], gold["Vitznau"]]  # third: past N = 2
    hit = RetrievalHit(program)

    def score(*asked):
        return hit(example, dspy.Prediction(sub_questions=list(asked)))

    assert score("nothing here", "Vitznau") == 1.0  # any of the sub-questions
    assert retriever.queries[-2:] == [("nothing here", 2), ("Vitznau", 2)]  # N passages each, as a state reads
    assert score("deep") == 0.0
    asked = len(retriever.queries)
    assert score(example.question, example.question.lower()) == 0.0  # restating the question is no search
    assert len(retriever.queries) == asked
    assert score("Rigi Railways") == 0.0  # the paragraph already behind the state is not missing


def test_the_beams_ask_compiles_against_retrieval_and_loads_back(train, tmp_path):
    hotpot, _ = train
    lm, engine = beam_asker(hotpot, right=lambda call: len(call.messages) > 2, restate=True)
    with dspy.context(lm=lm):
        compiled = QueryWriterFit(candidates=1).compile(build_program("beam", first_retriever(hotpot), preset="nq"),
                                                        trainset=hotpot)
    assert compiled.query_fit == {"writer": "ask", "examples": 6, "width": 2, "prepared_hit_rate": 16.7,
                                  "compiled_hit_rate": 100.0, "kept": "compiled", "demos": 1}
    (demo,) = compiled.ask.demos  # the path it got right, with its own sub-questions
    assert list(demo["sub_questions"])[-1] == "Vitznau" and "Rigi Railways" in demo["history"]
    tuning = OptimizeSpec(program="beam", preset="nq", optimizer="query").tuning() | {"candidates": 1}
    # with no demos the prepared writer is the zero-shot one, whose calls the log replays: the 6
    # paths once, then the one bootstrapped demo set on the 6, within the declared bound
    assert len(engine.calls) == 12 <= compile_call_bound("query", 33, 3, tuning)  # 3 two-hop questions
    compiled.save(tmp_path / "beam.json")
    again = build_program("beam", first_retriever(hotpot), preset="nq")
    again.load(tmp_path / "beam.json")
    assert again.ask.demos[0]["sub_questions"] == demo["sub_questions"]


def test_a_beam_that_searches_nothing_with_its_sub_questions_is_refused():
    with pytest.raises(ValueError, match="evidence=genread; only evidence=retrieval"):
        OptimizeSpec(program="beam", preset="triviaqa", optimizer="query")
    with pytest.raises(ValueError, match="depth=0"):
        OptimizeSpec(program="beam", preset="nq", optimizer="query", params={"depth": 0})
    OptimizeSpec(program="beam", preset="nq", optimizer="annotated+query")
