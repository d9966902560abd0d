"""BeamSearchQA follows Algorithm 1 of the ALLIES paper, driven by a scripted LM.

The script (`tests.fakes.BeamScript`) names every state by the last sub-question on its path
("root" for the seed without evidence, the question itself for the seed with evidence, "root1",
"root12" … below them). The answer of a state is "ans:<name>", and the confidence of that answer
is read from a table, so each test decides which states win.
"""

import copy
import json

import dspy
import pytest

from tests.fakes import BeamScript, FakeRetriever, Overlap, scripted_lm
from treeqa.data.corpus import Passage
from treeqa.programs.beam_search import PRESETS, BeamSearchQA, SearchState, same_question, voted

QUESTION = "QQ"


def run(script, question=QUESTION, retriever=None, **settings):
    settings.setdefault("evidence", "retrieval")
    if settings["evidence"] == "retrieval" and retriever is None:
        retriever = FakeRetriever()
    program = BeamSearchQA(retriever, **settings)
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm):
        pred = program(question=question)
    return pred, engine, retriever


def expected_calls(k, d, b, mode):
    """Algorithm 1 counted by hand: seeds, then per expanded state one Ask and, per sub-question,
    evidence (retrieval or GENREAD; none without evidence) + Answer + Score."""
    per_sub = 2 if mode == "none" else 3
    total, beam = (2, 1) if mode == "none" else (5, 2)
    for _ in range(d):
        total += beam * (1 + k * per_sub)
        beam = min(b, beam * k)
    return total


def states_by_name(pred):
    return {(s["sub_questions"] or ["root"])[-1]: s for s in pred.tree["states"]}


# --- the number of LM calls -------------------------------------------------------------

@pytest.mark.parametrize("k, d, b, mode", [
    (2, 2, 2, "retrieval"),  # the NQ setting
    (2, 1, 3, "genread"),    # TriviaQA
    (3, 2, 3, "genread"),    # WebQ
    (1, 3, 1, "retrieval"),
    (3, 2, 2, "none"),
    (2, 0, 2, "retrieval"),
])
def test_lm_calls_match_the_algorithm(k, d, b, mode):
    pred, engine, retriever = run(BeamScript(), max_queries=k, depth=d, beam_size=b, evidence=mode)
    assert len(engine.calls) == expected_calls(k, d, b, mode)
    # no early exit here, so the plan's bound is met exactly (beam 0's two seeds both ask, whatever B)
    settings = {**BeamSearchQA(retriever, evidence=mode).settings, "max_queries": k, "depth": d, "beam_size": b}
    assert BeamSearchQA.call_bound(settings) == len(engine.calls)
    evidence_kind = {"retrieval": "evidence", "genread": "document", "none": None}[mode]
    seeds = ["answer", "confidence"] + ([evidence_kind, "answer", "confidence"] if evidence_kind else [])
    assert engine.kinds()[: len(seeds)] == seeds
    n_states = len(pred.tree["states"])
    assert engine.kinds().count("answer") == engine.kinds().count("confidence") == n_states
    if mode == "retrieval":
        assert len(retriever.asked) == n_states - 1  # every state but the first seed retrieved once
        assert retriever.asked[0] == QUESTION
    assert pred.failures == []


@pytest.mark.parametrize("k, d, b", [(2, 2, 2), (1, 3, 1), (2, 0, 2)])
def test_evidence_written_from_passages_makes_no_summary_call(k, d, b):
    pred, engine, retriever = run(BeamScript(), max_queries=k, depth=d, beam_size=b, evidence_chars=40)
    assert "evidence" not in engine.kinds()
    n_states = len(pred.tree["states"])
    assert len(engine.calls) == expected_calls(k, d, b, "retrieval") - (n_states - 1)  # one summary a state saved
    assert len(engine.calls) == BeamSearchQA.call_bound({**BeamSearchQA(retriever, evidence_chars=40).settings,
                                                         "max_queries": k, "depth": d, "beam_size": b})
    assert len(retriever.asked) == n_states - 1
    assert pred.tree["settings"]["evidence_chars"] == 40
    seed = states_by_name(pred)[QUESTION]
    shown = [p.as_text(40) for p in retriever.search(QUESTION, 2)]
    assert seed["evidences"] == [" ".join(shown)]  # the passages themselves, each cut to 40 characters
    if d:
        first_ask = engine.of("sub_questions")[0].inputs["history"]
        assert shown[0] in first_ask or any(shown[0] in c.inputs["history"] for c in engine.of("sub_questions"))
    assert pred.failures == []


def test_evidence_from_passages_keeps_no_summarizer_and_is_refused_without_retrieval():
    assert "summarize" not in {n for n, _ in BeamSearchQA(FakeRetriever(), evidence_chars=300).named_predictors()}
    with pytest.raises(ValueError, match="needs evidence='retrieval'"):
        BeamSearchQA(None, evidence="genread", evidence_chars=300)
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="evidence_chars must be None or an integer"):
            BeamSearchQA(FakeRetriever(), evidence_chars=bad)


def test_nq_preset_makes_33_calls_without_early_exit():
    program = BeamSearchQA.preset("nq", FakeRetriever())
    lm, engine = scripted_lm(BeamScript(default=0.5))
    with dspy.context(lm=lm):
        program(question=QUESTION)
    assert len(engine.calls) == 33 == expected_calls(2, 2, 2, "retrieval")


# --- pruning, early exit, final choice ------------------------------------------------------

def test_pruning_keeps_the_b_most_confident_and_only_they_are_expanded():
    # beam 0 ranks QQ (0.2) before root (0.1), so QQ's children are created first
    conf = {"root": 0.1, QUESTION: 0.2, "QQ1": 0.3, "QQ2": 0.6, "root1": 0.7, "root2": 0.6}
    pred, engine, _ = run(BeamScript(conf), max_queries=2, depth=2, beam_size=2, threshold=0.8)
    by = states_by_name(pred)
    assert [by[n]["status"] for n in ("QQ1", "QQ2", "root1", "root2")] == ["pruned", "kept", "kept", "pruned"]
    assert pred.tree["beams"][1] == [by["root1"]["id"], by["QQ2"]["id"]]  # 0.6 tie: QQ2 was created first
    depth2_parents = {s["parent"] for s in pred.tree["states"] if s["depth"] == 2}
    assert depth2_parents == {by["root1"]["id"], by["QQ2"]["id"]}
    assert by["root1"]["asked"] == ["root11", "root12"] and by["root2"]["asked"] is None
    assert by["root11"]["sub_questions"] == ["root1", "root11"]
    assert by["root11"]["evidences"] == ["facts about root1", "facts about root11"]


def test_early_exit_stops_after_the_depth_that_reaches_the_threshold():
    conf = {"root2": 0.85, "QQ1": 0.5}
    pred, engine, _ = run(BeamScript(conf), max_queries=2, depth=3, beam_size=2, threshold=0.8)
    assert len(engine.calls) == expected_calls(2, 1, 2, "retrieval")  # depth 2 and 3 never run
    assert max(s["depth"] for s in pred.tree["states"]) == 1
    assert pred.tree["stop"] == "threshold" and len(pred.tree["beams"]) == 2
    assert pred.answer == "ans:root2" and pred.confidence == pytest.approx(0.85)


def test_threshold_is_inclusive():
    pred, engine, _ = run(BeamScript({"QQ1": 0.8}), max_queries=2, depth=2, beam_size=2, threshold=0.8)
    assert pred.tree["stop"] == "threshold" and pred.answer == "ans:QQ1"


def test_seeds_do_not_stop_the_search_by_default_but_can():
    conf = {"root": 0.95, "QQ1": 0.4}
    pred, engine, _ = run(BeamScript(conf), max_queries=2, depth=1, beam_size=2, threshold=0.8)
    assert len(engine.calls) == expected_calls(2, 1, 2, "retrieval")  # Algorithm 1 checks after expanding
    assert pred.answer == "ans:QQ1"  # line 26: the best state of the last beam
    pred, engine, _ = run(BeamScript(conf), max_queries=2, depth=1, beam_size=2, threshold=0.8, check_seeds=True)
    assert len(engine.calls) == 5 and pred.answer == "ans:root" and pred.tree["stop"] == "threshold"


def test_depth_zero_answers_from_the_best_seed():
    pred, _, _ = run(BeamScript({"root": 0.3, QUESTION: 0.6}), depth=0)
    assert pred.answer == f"ans:{QUESTION}" and pred.tree["best"] == 1


def test_ties_go_to_the_state_created_first():
    pred, _, _ = run(BeamScript(default=0.5), max_queries=2, depth=1, beam_size=4)
    # beam 0 is a tie, so the first seed is expanded first and its first child wins
    assert pred.answer == "ans:root1" and pred.tree["best"] == 2
    assert pred.tree["beams"] == [[0, 1], [2, 3, 4, 5]]
    again, _, _ = run(BeamScript(default=0.5), max_queries=2, depth=1, beam_size=4)
    assert again.tree == pred.tree


def test_vote_picks_the_answer_the_tree_agrees_on_and_leaves_the_search_alone():
    # root1 tops the last beam alone (0.7); three other states, pruned ones and a seed among
    # them, say "Paris" (written three ways) with 0.4 + 0.5 + 0.3 = 1.2 summed
    conf = {"root": 0.4, QUESTION: 0.3, "root1": 0.7, "root2": 0.5, "QQ1": 0.1, "QQ2": 0.2}
    answers = {"root": "Paris", QUESTION: "paris.", "root2": "The Paris", "QQ2": "Lyon"}
    settings = dict(max_queries=2, depth=1, beam_size=1, threshold=0.9)
    paper, paper_engine, _ = run(BeamScript(conf, answers=answers), **settings)
    pred, engine, _ = run(BeamScript(conf, answers=answers), pick="vote", **settings)
    assert paper.answer == "ans:root1" and paper.tree["settings"]["pick"] == "beam"
    by = states_by_name(pred)
    # the most confident of the Paris states answers; it was pruned from the last beam
    assert pred.answer == "The Paris" and pred.tree["best"] == by["root2"]["id"] == 3
    assert by["root2"]["status"] == "pruned" and pred.confidence == pytest.approx(0.5)
    # the same search: same calls, same states, same stop; only the pick differs
    assert engine.calls == paper_engine.calls
    assert {k: v for k, v in pred.tree.items() if k not in ("best", "settings")} == \
        {k: v for k, v in paper.tree.items() if k not in ("best", "settings")}


def test_vote_ties_go_to_the_preferred_answer_else_the_first_and_failed_or_empty_states_do_not_vote():
    states = [SearchState(0, 0, None, [], [], answer="Rome", confidence=0.5),
              SearchState(1, 0, None, ["q"], ["e"], answer="Oslo", confidence=0.5),
              SearchState(2, 1, 1, ["q", "r"], ["e", "f"], answer="Bergen", confidence=0.9, status="failed"),
              SearchState(3, 1, 0, ["s"], ["g"], answer="  ", confidence=0.9)]
    assert voted(states).answer == "Rome"
    assert voted(list(reversed(states))).answer == "Rome"  # by creation, not by list order
    assert voted(states, prefer=states[1]).answer == "Oslo"  # no agreement either way: the program's own pick
    more = states + [SearchState(4, 1, 1, ["q", "t"], ["e", "h"], answer="oslo", confidence=0.1)]
    assert voted(more, prefer=states[0]).answer == "Oslo"  # agreement outweighs the preference
    assert voted(states[2:]) is None


# --- sub-questions ----------------------------------------------------------------------

def test_a_sub_question_already_on_the_path_is_not_asked_again():
    asks = {
        "root": ["QQ", "a", "A?", " a ", "b", "c"],  # the question itself and repeats are skipped; K=2 cut
        "a": ["a", "b", "d"],  # "a" is on this path; "b" is not (it is on a sibling path)
    }
    pred, engine, retriever = run(BeamScript({"a": 0.7}, asks=asks), max_queries=2, depth=2, beam_size=1)
    by = states_by_name(pred)
    assert by["root"]["asked"] == ["QQ", "a", "A?", "a", "b", "c"]  # as parsed, before filtering
    assert [s["sub_questions"] for s in pred.tree["states"] if s["parent"] == 0] == [["a"], ["b"]]
    assert [s["sub_questions"] for s in pred.tree["states"] if s["depth"] == 2] == [["a", "b"], ["a", "d"]]
    assert retriever.asked == [QUESTION, "a", "b", "QQ1", "QQ2", "b", "d"]


def test_a_lightly_reworded_question_counts_as_asked():
    question = "Which city hosted the 1992 Summer Olympics games?"
    asks = {"root": ["Which city hosted the 1992 Summer Olympics?", "When were the 1992 Summer Olympics held?"]}
    pred, engine, retriever = run(BeamScript(asks=asks), question=question, max_queries=2, depth=1, evidence="none")
    assert [s["sub_questions"] for s in pred.tree["states"] if s["depth"] == 1] == [
        ["When were the 1992 Summer Olympics held?"]]


@pytest.mark.parametrize("a, b, same", [
    ("Who wrote Carmen?", "who wrote carmen", True),
    ("Ellie Goulding worked with what other writers on Delirium?",
     "Ellie Goulding worked with other writers on Delirium?", True),
    ("When was Albert Einstein born?", "When was Niels Bohr born?", False),
    ("Where is the Laleli Mosque?", "Where is the Esma Sultan Mansion?", False),
])
def test_same_question(a, b, same):
    assert same_question(a, b) is same


def test_evidence_none_keeps_sub_questions_without_evidence():
    pred, engine, _ = run(BeamScript(), max_queries=1, depth=1, evidence="none")
    history = [c.inputs["history"] for c in engine.calls if c.kind == "answer"][-1]
    assert "Query: root1" in history and "(no evidence)" in history
    assert "retrieved" not in pred


def test_genread_writes_a_background_for_each_sub_question():
    pred, engine, _ = run(BeamScript(), max_queries=2, depth=1, evidence="genread")
    asked = [c.inputs["question"] for c in engine.calls if c.kind == "document"]
    assert asked == [QUESTION, "root1", "root2", "QQ1", "QQ2"]
    assert states_by_name(pred)["root2"]["evidences"] == ["background on root2"]


# --- failures -----------------------------------------------------------------------------

def test_a_failed_score_leaves_the_state_at_zero_and_is_recorded():
    script = BeamScript({"root1": 0.7, "QQ1": 0.9}, fail={("confidence", "QQ1")})
    pred, engine, _ = run(script, max_queries=2, depth=1, beam_size=2)
    assert len(engine.calls) == expected_calls(2, 1, 2, "retrieval")
    qq1 = states_by_name(pred)["QQ1"]
    assert qq1["confidence"] == 0.0 and qq1["answer"] == "ans:QQ1" and qq1["status"] == "pruned"
    assert pred.failures == [{**qq1["failures"][0], "state": qq1["id"]}]
    assert pred.failures[0]["where"] == f"state{qq1['id']}.score"
    assert "scripted failure of confidence for QQ1" in pred.failures[0]["message"]
    assert pred.answer == "ans:root1"


def test_an_unparseable_score_counts_as_a_failure():
    pred, engine, _ = run(BeamScript(garbage={("confidence", "root")}), depth=0)
    assert states_by_name(pred)["root"]["confidence"] == 0.0
    assert [f["where"] for f in pred.failures] == ["state0.score"]
    assert len(engine.calls) == 6  # the JSON-adapter retry of the unparseable reply is the extra call


def test_a_failed_answer_or_evidence_drops_the_state():
    script = BeamScript({"root2": 0.6}, fail={("answer", "root1"), ("evidence", "QQ2")})
    pred, engine, _ = run(script, max_queries=2, depth=1, beam_size=4)
    by = states_by_name(pred)
    assert by["root1"]["status"] == by["QQ2"]["status"] == "failed"
    assert by["QQ2"]["evidences"] == ["facts about QQ", ""] and by["QQ2"]["answer"] == ""
    assert len(engine.calls) == expected_calls(2, 1, 4, "retrieval") - 1 - 2  # no score; no answer+score
    assert pred.tree["beams"][1] == [by["root2"]["id"], by["QQ1"]["id"]]
    assert [f["where"] for f in pred.failures] == [f"state{by['root1']['id']}.answer",
                                                   f"state{by['QQ2']['id']}.summarize"]
    assert pred.answer == "ans:root2"


def test_a_failed_search_drops_that_state_only_and_is_recorded():
    class Failing(FakeRetriever):
        def search_batch(self, queries, k):
            if "root1" in queries:
                raise OSError("index gone")
            return super().search_batch(queries, k)

    pred, engine, _ = run(BeamScript({"root2": 0.6}), retriever=Failing(), max_queries=2, depth=1, beam_size=4)
    by = states_by_name(pred)
    assert by["root1"]["status"] == "failed" and by["root1"]["passages"] == []
    assert by["root1"]["evidences"] == [""] and by["root1"]["answer"] == ""
    assert [f["where"] for f in pred.failures] == [f"state{by['root1']['id']}.retrieve"]
    assert pred.failures[0]["error"] == "OSError" and pred.failures[0]["message"] == "index gone"
    assert len(engine.calls) == expected_calls(2, 1, 4, "retrieval") - 3  # no summary, answer or score
    assert pred.answer == "ans:root2"


def test_a_failed_ask_only_stops_that_branch():
    pred, engine, _ = run(BeamScript(fail={("sub_questions", "root")}), max_queries=2, depth=1)
    assert [s["parent"] for s in pred.tree["states"] if s["depth"] == 1] == [1, 1]
    assert pred.tree["states"][0]["asked"] == [] and pred.failures[0]["where"] == "state0.ask"


def test_when_every_call_fails_the_answer_is_empty_and_failures_are_listed():
    pred, engine, retriever = run(lambda kind, inputs: TimeoutError("server down"), depth=2)
    assert pred.answer == "" and pred.confidence == 0.0
    assert [f["where"] for f in pred.failures] == ["state0.answer", "state1.summarize"]
    assert all("server down" in f["message"] for f in pred.failures)
    assert pred.tree["stop"] == "empty_beam" and pred.tree["best"] is None
    assert len(engine.calls) == 2


def test_no_new_sub_questions_keeps_the_previous_beam():
    pred, engine, _ = run(BeamScript({"QQ": 0.6}, asks={"root": [], "QQ": ["qq"]}), depth=2)
    assert pred.tree["stop"] == "no_new_states" and pred.answer == "ans:QQ"


# --- output ---------------------------------------------------------------------------------

def test_tree_is_plain_json_with_every_state():
    pred, _, _ = run(BeamScript({"root1": 0.4}), max_queries=2, depth=2, beam_size=2)
    tree = json.loads(json.dumps(pred.tree))
    assert tree == pred.tree
    assert tree["question"] == QUESTION and tree["settings"]["beam_size"] == 2
    keys = {"id", "depth", "parent", "sub_questions", "evidences", "passages", "answer", "confidence", "status",
            "asked", "failures", "judge_path"}
    ids = [s["id"] for s in tree["states"]]
    assert ids == list(range(len(ids)))
    for s in tree["states"]:
        assert set(s) == keys and s["status"] in {"kept", "pruned", "failed"}
        if s["parent"] is not None:
            parent = tree["states"][s["parent"]]
            assert s["depth"] == parent["depth"] + 1
            assert s["sub_questions"][:-1] == parent["sub_questions"]
        assert len(s["sub_questions"]) == len(s["evidences"])
    assert tree["states"][tree["best"]]["answer"] == pred.answer


def test_retrieved_lists_each_passage_once_first_retrieved_first():
    pred, _, retriever = run(BeamScript(), max_queries=2, depth=1, retriever=FakeRetriever(shared_id=True))
    ids = [p.id for p in pred.retrieved]
    assert ids[:2] == ["common", f"{QUESTION}|1"] and len(ids) == len(set(ids))
    assert all(isinstance(p, Passage) for p in pred.retrieved)
    assert len(ids) == 1 + len(retriever.asked)  # "common" + one own passage per query (N=2)


def test_genread_has_no_retrieved_field():
    pred, _, _ = run(BeamScript(), depth=0, evidence="genread")
    assert "retrieved" not in pred


# --- saving and loading ----------------------------------------------------------------------

def test_save_and_load_reproduces_the_prompts(tmp_path):
    program = BeamSearchQA(FakeRetriever(), max_queries=2, depth=1)
    program.ask.demos = [dspy.Example(question="demo q", history="(none yet)", max_questions=2,
                                      sub_questions=["demo sub 1", "demo sub 2"])]
    program.answer.demos = [dspy.Example(question="demo q", history="(none yet)", answer="DEMO ANSWER")]
    program.scorer.demos = [dspy.Example(question="demo q", history="(none yet)", answer="x", confidence=0.3)]
    program.summarize.demos = [dspy.Example(question="demo q", passages=["T: t"], evidence="DEMO FACTS")]
    program.answer.signature = program.answer.signature.with_instructions("Answer tersely: one entity.")
    path = tmp_path / "program.json"
    program.save(str(path))

    fresh = BeamSearchQA(FakeRetriever(), max_queries=2, depth=1)
    fresh.load(str(path))
    prompts = []
    for p in (program, fresh):
        lm, engine = scripted_lm(BeamScript())
        with dspy.context(lm=lm):
            p(question=QUESTION)
        prompts.append([c.messages for c in engine.calls])
    assert prompts[0] == prompts[1]
    text = json.dumps(prompts[1])
    assert "DEMO ANSWER" in text and "DEMO FACTS" in text and "demo sub 2" in text
    assert "Answer tersely: one entity." in text
    fresh.save(str(tmp_path / "again.json"))
    assert (tmp_path / "again.json").read_text() == path.read_text()
    assert "retriever" not in path.read_text()


# --- construction ----------------------------------------------------------------------------

def test_predictor_names():
    names = {n for n, _ in BeamSearchQA(FakeRetriever()).named_predictors()}
    assert names == {"ask", "answer", "scorer", "summarize"}
    names = {n for n, _ in BeamSearchQA(evidence="genread").named_predictors()}
    assert names == {"ask", "answer", "scorer", "background"}
    assert not hasattr(BeamSearchQA(evidence="none"), "score")


def test_copies_share_the_retriever():
    retriever = FakeRetriever()
    program = BeamSearchQA(retriever)
    assert program.deepcopy().retriever is retriever
    assert copy.deepcopy(program).retriever is retriever
    assert program.reset_copy().retriever is retriever


@pytest.mark.parametrize("question", ["", "   ", None])
def test_empty_question_is_an_error(question):
    with pytest.raises(ValueError, match="question is empty"):
        BeamSearchQA(FakeRetriever())(question=question)


@pytest.mark.parametrize("kwargs, match", [
    ({}, "needs a retriever"),
    ({"evidence": "web"}, "evidence must be one of"),
    ({"evidence": "none", "max_queries": 0}, "max_queries"),
    ({"evidence": "none", "depth": -1}, "depth"),
    ({"evidence": "none", "beam_size": 0}, "beam_size"),
    ({"evidence": "none", "threshold": 1.5}, "threshold"),
    ({"evidence": "none", "pick": "best"}, "pick must be one of beam, vote"),
])
def test_bad_settings_fail_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BeamSearchQA(None, **kwargs)


def test_presets_follow_table_6():
    assert set(PRESETS) == {"nq", "triviaqa", "webq"}
    nq = BeamSearchQA.preset("nq", FakeRetriever())
    assert (nq.threshold, nq.beam_size, nq.depth, nq.passages, nq.max_queries, nq.evidence) == (
        0.8, 2, 2, 2, 2, "retrieval")
    tqa = BeamSearchQA.preset("triviaqa")
    assert (tqa.beam_size, tqa.depth, tqa.max_queries, tqa.evidence) == (3, 1, 2, "genread")
    webq = BeamSearchQA.preset("webq", depth=1)
    assert (webq.beam_size, webq.depth, webq.max_queries, webq.evidence) == (3, 1, 3, "genread")
    with pytest.raises(ValueError, match="needs a retriever"):
        BeamSearchQA.preset("nq")
    with pytest.raises(ValueError, match="unknown preset"):
        BeamSearchQA.preset("squad")


# --- concurrent calls for remote endpoints ----------------------------------------------

def test_threads_send_one_depth_concurrently_with_the_same_tree():
    overlap = Overlap(hold=0.02)
    script = BeamScript(conf={"root1": 0.5, "QQ2": 0.6, "root12": 0.7})

    def slow(kind, inputs):
        with overlap:
            return script(kind, inputs)

    serial, serial_engine, _ = run(slow, max_queries=2, depth=2, beam_size=2)
    assert overlap.peak == 1
    parallel, parallel_engine, _ = run(slow, max_queries=2, depth=2, beam_size=2, threads=4)
    assert overlap.peak > 1
    assert parallel.tree == serial.tree
    assert [p.id for p in parallel.retrieved] == [p.id for p in serial.retrieved]
    assert (parallel.answer, parallel.confidence) == (serial.answer, serial.confidence)
    assert sorted(parallel_engine.kinds()) == sorted(serial_engine.kinds())
