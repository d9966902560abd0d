import json
import shutil

import dspy
import pytest

from tests.fakes import FIXTURE_DATA, FakeRetriever, answering, passage, review, review_kind, scripted_lm, use_lm
from treeqa.annotated import as_passage
from treeqa.compiled import load_program
from treeqa.judging.path_judge import PathJudge
from treeqa.optimize import OptimizeSpec, compile_call_bound, plan, run_optimize, stages
from treeqa.programs import TreeOfReviews, build_program
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
