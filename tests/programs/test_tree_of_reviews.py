"""TreeOfReviews with a scripted LM and a fake retriever: structure, pruning, expansion,
fusion, ranking, failures and save/load."""

import copy
import json

import dspy
import numpy as np
import pytest

from tests.fakes import (
    FakeRetriever,
    Overlap,
    Q,
    answering,
    hashing_embed,
    passage,
    review,
    review_kind,
    run,
    scripted_lm,
    tree_retriever,
)
from treeqa.data.answers import RECALL_K
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.programs.review_run import rank_retrieved
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.signatures.fusion import Evidence
from treeqa.signatures.review import CompleteMissingParagraph, ParagraphReview, ReviewWithReasoning


def always(action, **kw):
    return answering(lambda call: review(action, **kw))


def reviewed(pred):
    return [n for n in pred.tree["nodes"] if n["action"] in ("reject", "search", "accept")]


# --- structure and call counts -------------------------------------------------------------

@pytest.mark.parametrize(("widths", "reviews", "retrievals"),
                         [((3, 2), 3 + 6, 1 + 3), ((5, 3, 3), 5 + 15 + 45, 1 + 5 + 15)])
def test_every_node_searches_until_the_last_level(widths, reviews, retrievals):
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=widths, expansion="direct")
    pred, engine = run(program, always("search", next_query="more"))
    assert len(engine.of("review")) == reviews and pred.tree["stats"]["reviews"] == reviews
    assert len(engine.of("fuse")) == 1 and not engine.of("complete")
    assert len(retriever.queries) == retrievals
    nodes = pred.tree["nodes"]
    assert len(nodes) == 1 + reviews
    for depth, width in enumerate(widths, start=1):
        level = [n for n in nodes if n["depth"] == depth]
        assert len(level) == int(np.prod(widths[:depth]))
        assert all(n["expanded"] == (depth < len(widths)) for n in level)
        parents = {n["parent"] for n in level}
        assert all(sum(n["parent"] == p for n in level) == width for p in parents)


def test_mpc_adds_one_completion_per_expanded_node():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), expansion="mpc")
    pred, engine = run(program, always("search"))
    assert len(engine.of("review")) == 9
    assert len(engine.of("complete")) == 3  # only the depth-1 nodes expand
    assert pred.tree["stats"]["completions"] == 3


def test_depth_defaults_to_the_widths_and_is_checked():
    assert TreeOfReviews(retriever=tree_retriever()).widths == (5, 3, 3)
    assert TreeOfReviews(retriever=tree_retriever(), widths=(5, 3, 3), depth=2).widths == (5, 3)
    with pytest.raises(ValueError, match="depth"):
        TreeOfReviews(retriever=tree_retriever(), widths=(5, 3), depth=3)
    with pytest.raises(ValueError, match="widths"):
        TreeOfReviews(retriever=tree_retriever(), widths=(5, 0))


def test_review_sees_every_paragraph_on_its_path_root_first():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2, 2), expansion="direct")
    _, engine = run(program, answering(lambda c: review("search", next_query=f"after {c.titles[-1]}")))
    paths = [c.titles for c in engine.of("review")]
    # each node asks past its ancestors ("after N1" gets N3-N5), so the width holds
    assert paths[:5] == [["N1"], ["N1", "N3"], ["N1", "N3", "N6"], ["N1", "N3", "N7"], ["N1", "N4"]]
    assert max(len(p) for p in paths) == 3


def test_a_path_never_repeats_a_paragraph():
    a, b, c = passage("A"), passage("B"), passage("C")
    retriever = tree_retriever(fixed={Q: [a], "next": [a, b, c]})
    program = TreeOfReviews(retriever=retriever, widths=(1, 2), expansion="direct")
    pred, engine = run(program, always("search", next_query="next"))
    assert [c.titles for c in engine.of("review")] == [["A"], ["A", "B"], ["A", "C"]]
    assert retriever.queries[-1] == ("next", 3)  # asked past the ancestor to keep the width


def test_accept_stops_the_path_and_fills_the_pool():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct")
    pred, engine = run(program, always("accept", analysis="Jane Doe wrote it."))
    assert len(engine.of("review")) == 2  # nothing expands
    assert [e["titles"] for e in pred.evidence] == [["N1"], ["N2"]]
    assert [e["analysis"] for e in pred.evidence] == ["Jane Doe wrote it."] * 2
    assert pred.answer == "42"


def test_max_evidence_stops_the_whole_search():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(5, 3), expansion="direct", max_evidence=2)
    pred, engine = run(program, always("accept", analysis="It is 42."))
    assert len(engine.of("review")) == 2 and len(pred.evidence) == 2


# --- pruning ---------------------------------------------------------------------------------

def _reject_first(call):
    return review("reject") if call.titles[-1] == "N1" else review("search", next_query=f"after {call.titles[-1]}")


@pytest.mark.parametrize(("pruning", "reviews"), [(True, 2 + 2), (False, 2 + 4)])
def test_relevance_pruning(pruning, reviews):
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct", relevance_pruning=pruning)
    pred, engine = run(program, answering(_reject_first))
    assert len(engine.of("review")) == reviews
    n1 = next(n for n in pred.tree["nodes"] if n["title"] == "N1")
    assert n1["action"] == "reject" and n1["expanded"] == (not pruning)


@pytest.mark.parametrize("pruning", [True, False])
def test_repetitive_pruning(pruning):
    a, b, c = passage("A"), passage("B"), passage("C")
    retriever = tree_retriever(fixed={Q: [a, b], "from B": [a, c]})

    def script(call):
        if call.titles == ["A"]:
            return review("accept", analysis="A answers it.")
        if call.titles == ["B"]:
            return review("search", next_query="from B")
        return review("reject")

    program = TreeOfReviews(retriever=retriever, widths=(2, 2), expansion="direct", repetitive_pruning=pruning)
    pred, engine = run(program, answering(script))
    a_under_b = [n for n in pred.tree["nodes"] if n["title"] == "A" and n["depth"] == 2]
    assert len(a_under_b) == 1
    if pruning:
        assert a_under_b[0]["action"] == "pruned" and pred.tree["stats"]["pruned_repetitive"] == 1
        assert [c.titles for c in engine.of("review")] == [["A"], ["B"], ["B", "C"]]
    else:
        assert a_under_b[0]["action"] == "reject" and pred.tree["stats"]["pruned_repetitive"] == 0
        assert [c.titles for c in engine.of("review")] == [["A"], ["B"], ["B", "A"], ["B", "C"]]


# --- expansion strategies --------------------------------------------------------------------

def test_direct_expansion_searches_with_the_reviews_query():
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(1, 1), expansion="direct")
    pred, engine = run(program, always("search", next_query="novel Example author"))
    assert program.review.signature.instructions == ParagraphReview.instructions
    assert "reasoning" not in program.review.signature.output_fields
    assert [q for q, _ in retriever.queries] == [Q, "novel Example author"]
    assert pred.tree["nodes"][1]["query"] == "novel Example author"


def test_cot_expansion_reasons_before_the_query():
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(1, 1), expansion="cot")
    assert list(program.review.signature.output_fields)[0] == "reasoning"
    assert program.review.signature.instructions == ReviewWithReasoning.instructions
    pred, _ = run(program, always("search", next_query="who wrote Example", reasoning="The author is missing."))
    assert [q for q, _ in retriever.queries] == [Q, "who wrote Example"]
    assert pred.tree["nodes"][1]["reasoning"] == "The author is missing."


def test_mpc_expansion_searches_with_the_missing_paragraph():
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(1, 1), expansion="mpc")
    assert program.complete_paragraph.signature.instructions == CompleteMissingParagraph.instructions
    text = "Example (novel) is a 1990 novel by Jane Doe."
    pred, engine = run(program, answering(lambda c: review("search", next_query="unused"), missing=lambda c: text))
    assert [q for q, _ in retriever.queries] == [Q, text]
    assert engine.of("complete")[0].titles == ["N1"]  # it sees the path it completes


def test_mpc_failure_falls_back_to_the_reviews_query():
    retriever = tree_retriever()

    def script(call):
        if call.kind == "complete":
            return TimeoutError("slow")
        return review("search", next_query="review query") if call.kind == "review" else {"answer": "x"}

    program = TreeOfReviews(retriever=retriever, widths=(1, 1), expansion="mpc")
    pred, _ = run(program, script)
    assert [q for q, _ in retriever.queries] == [Q, "review query"]
    assert pred.tree["stats"]["completion_failures"] == 1
    assert pred.failures[0]["where"] == "expand@node1"


def test_a_search_without_a_query_searches_question_and_title():
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(1, 1), expansion="direct")
    pred, _ = run(program, always("search", next_query="None"))
    assert [q for q, _ in retriever.queries] == [Q, f"{Q} N1"]
    assert pred.tree["stats"]["query_fallbacks"] == 1


# --- fusion ----------------------------------------------------------------------------------

def _two_pieces(call):
    if call.titles == ["N1"]:
        return review("search", next_query="second hop")
    if call.titles[-1] in ("N3",):
        return review("accept", analysis="Jane Doe wrote Example.")
    if call.titles == ["N2"]:
        return review("accept", analysis="The author is Jane Doe.")
    return review("reject")


@pytest.mark.parametrize("fusion", ["analysis", "paragraph", "evidence"])
def test_fusion_modes_pass_their_context(fusion):
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct", fusion=fusion)
    pred, engine = run(program, answering(_two_pieces, answer="The answer is Jane Doe."))
    (fuse,) = engine.of("fuse")
    assert pred.answer == "Jane Doe"
    assert pred.tree["stats"]["fused_from"] == "evidence"
    if fusion == "analysis":
        assert fuse.inputs["analyses"] == ["Jane Doe wrote Example.", "The author is Jane Doe."]
        assert "paragraphs" not in fuse.inputs
    elif fusion == "paragraph":
        assert fuse.inputs["paragraphs"] == ["N1: Facts about N1.", "N3: Facts about N3.", "N2: Facts about N2."]
        assert "Jane Doe" not in json.dumps(fuse.inputs["paragraphs"])
    else:
        first, second = fuse.inputs["evidence"]
        assert first.startswith("Analysis: Jane Doe wrote Example.") and "N1: Facts about N1." in first
        assert "N3: Facts about N3." in first and "N2" not in first
        assert second.startswith("Analysis: The author is Jane Doe.") and "N2: Facts about N2." in second


def test_passages_fusion_asks_in_rtas_exact_prompt_so_an_rta_adapter_fits_it():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct", fusion="passages",
                            max_paragraph_chars=1000)
    pred, engine = run(program, answering(_two_pieces, answer="Jane Doe"))
    (fuse,) = engine.of("fuse")
    assert pred.answer == "Jane Doe"
    assert fuse.inputs["passages"] == ["N1: Facts about N1.", "N3: Facts about N3.", "N2: Facts about N2."]
    rta = RetrieveThenAnswer(FakeRetriever(), k=5)
    assert program.fuse.signature.equals(rta.answer.signature)


def test_fusion_drops_the_last_evidence_when_over_budget():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3,), expansion="direct", fusion="analysis",
                            max_context_chars=50)
    pred, engine = run(program, answering(lambda c: review("accept", analysis=f"{c.titles[-1]} says twenty chars")))
    assert len(pred.evidence) == 3
    assert engine.of("fuse")[0].inputs["analyses"] == ["N1 says twenty chars", "N2 says twenty chars"]


def test_empty_pool_reads_the_relevant_paragraphs_instead():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3,), expansion="direct", fusion="paragraph")
    script = answering(lambda c: review("search", next_query="q") if c.titles == ["N2"] else review("reject"))
    pred, engine = run(program, script)
    assert pred.evidence == [] and pred.tree["stats"]["fused_from"] == "fallback"
    assert engine.of("fuse")[0].inputs["paragraphs"] == ["N2: Facts about N2."]


def test_empty_pool_and_nothing_relevant_reads_the_questions_paragraphs():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2,), expansion="direct", fusion="paragraph")
    _, engine = run(program, always("reject"))
    assert engine.of("fuse")[0].inputs["paragraphs"] == ["N1: Facts about N1.", "N2: Facts about N2."]


def test_read_top_adds_the_best_other_paragraphs_after_the_pool():
    # N1 searched (relevant) -> N3 accepted, N4 rejected; N2 accepted at the root
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct", fusion="paragraph",
                            read_top=2)
    pred, engine = run(program, answering(_two_pieces, answer="Jane Doe"))
    assert pred.tree["stats"]["fused_from"] == "evidence+top"
    # the pool's paragraphs first, then the others not in it: N4 (rejected) is the only one left
    assert engine.of("fuse")[0].inputs["paragraphs"] == ["N1: Facts about N1.", "N3: Facts about N3.",
                                                         "N2: Facts about N2.", "N4: Facts about N4."]


def test_read_top_with_an_empty_pool_reads_the_most_relevant_paragraphs_first():
    # nothing accepted: N2 was judged relevant (and searched on), the others rejected
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), expansion="direct", fusion="paragraph",
                            read_top=3)
    script = answering(lambda c: review("search", next_query="q") if c.titles == ["N2"] else review("reject"))
    pred, engine = run(program, script)
    assert pred.evidence == [] and pred.tree["stats"]["fused_from"] == "top"
    read = engine.of("fuse")[0].inputs["paragraphs"]
    assert read[0] == "N2: Facts about N2." and read[1:] == ["N1: Facts about N1.", "N3: Facts about N3."]


def test_read_top_is_a_setting_with_a_bound():
    with pytest.raises(ValueError, match="read_top must be positive"):
        TreeOfReviews(retriever=tree_retriever(), read_top=0)
    assert TreeOfReviews(retriever=tree_retriever(), read_top=5).method_settings["read_top"] == 5
    assert 5 in TreeOfReviews.settings_space()["read_top"]



def _accept_below_n1(call):
    if call.titles == ["N1"]:
        return review("search", next_query="second hop")
    return review("accept", analysis="found") if call.titles[0] == "N1" else review("reject")


@pytest.mark.parametrize("read_root, read", [
    (0, ["N1", "N4", "N5", "N6", "N7"]),  # the five of the accepted paths: the root's N2, N3 unread
    (5, ["N1", "N4", "N5", "N6", "N7", "N2", "N3"]),  # then the root's paragraphs not shown, best first
    (1, ["N1", "N4", "N5", "N6", "N7", "N2"])])
def test_read_root_adds_the_questions_own_paragraphs_after_the_first_five(read_root, read):
    # the root retrieves N1-N3; N1 is searched on and its children N4-N8 each accepted with it
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3, 5), expansion="direct", fusion="passages",
                            read_root=read_root)
    pred, engine = run(program, answering(_accept_below_n1))
    assert [p.split(":")[0] for p in engine.of("fuse")[0].inputs["passages"]] == read
    assert pred.tree["stats"]["fused_from"] == ("evidence+root" if read_root else "evidence")
    assert program.passages_read == 5 + read_root


def test_read_root_is_a_setting_for_the_passages_reader_only():
    with pytest.raises(ValueError, match="read_root must be 0 or more"):
        TreeOfReviews(retriever=tree_retriever(), fusion="passages", read_root=-1)
    with pytest.raises(ValueError, match="fusion='evidence' has none"):
        TreeOfReviews(retriever=tree_retriever(), read_root=5)
    assert TreeOfReviews(retriever=tree_retriever(), fusion="passages", read_root=5).method_settings["read_root"] == 5

# --- recall@15 ranking -----------------------------------------------------------------------

def test_ranking_puts_evidence_then_relevant_then_the_rest():
    ps = [passage(f"P{i}") for i in range(6)]
    pool = [Evidence((ps[3], ps[4]), "x")]
    ranked = rank_retrieved(pool, ps, "answer", relevant_ids=["p1"], embed_fn=lambda t: pytest.fail("no re-rank"))
    assert [p.title for p in ranked] == ["P3", "P4", "P1", "P0", "P2", "P5"]


def test_ranking_reranks_by_similarity_to_the_answer_beyond_k():
    # P12 and P19 name the answer: under the stand-in encoder (shared words) they point its way
    ps = [passage(f"P{i}", f"P{i} was written by Jane Doe." if i in (12, 19) else None) for i in range(20)]
    pool = [Evidence((ps[i],), f"analysis {i}") for i in range(16)]  # 16 > 15 evidence paragraphs
    ranked = rank_retrieved(pool, ps, "Jane Doe", relevant_ids=["p17"], embed_fn=hashing_embed)
    titles = [p.title for p in ranked]
    assert titles[0] == "P12"  # the evidence closest to the answer comes first
    assert titles[1:16] == [f"P{i}" for i in range(16) if i != 12]
    assert titles[16] == "P17"  # then the relevant tier, then the rest by similarity
    assert titles[17:] == ["P19", "P16", "P18"]
    assert len(ranked) > RECALL_K and len(set(titles)) == len(titles)


def test_program_returns_the_ranked_passages():
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(3, 2), expansion="direct", embed_fn=hashing_embed)
    script = answering(lambda c: review("accept", analysis="ok") if c.titles[-1] == "N5"
                       else review("search", next_query=f"q{c.titles[-1]}"))
    pred, _ = run(program, script)
    titles = [p.title for p in pred.retrieved]
    assert titles[:2] == ["N1", "N5"]  # the accepted path first
    # every node of the tree, and nothing fetched past an ancestor that never became a node (N6, N9, N12)
    assert set(titles) == {"N1", "N2", "N3", "N4", "N5", "N7", "N8", "N10", "N11"}
    assert pred.retrieved_ids == [p.id for p in pred.retrieved]


# --- failures --------------------------------------------------------------------------------

@pytest.mark.parametrize(("bad", "engine_calls"), [(TimeoutError("llama timed out"), 1), ("no fields at all", 2)])
def test_a_failed_review_counts_as_reject_and_is_recorded(bad, engine_calls):
    def script(call):
        if call.kind == "review" and call.titles == ["N2"]:
            return bad
        if call.kind == "review":
            return review("accept", analysis=f"{call.titles[-1]} fits")
        return {"answer": "done"}

    program = TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), expansion="direct")
    pred, engine = run(program, script)
    n2 = next(n for n in pred.tree["nodes"] if n["title"] == "N2")
    assert n2["action"] == "reject" and not n2["expanded"]
    assert len(n2["failures"]) == 1 and n2["failures"][0]["where"] == f"review@node{n2['node']}"
    assert pred.tree["stats"]["review_failures"] == 1 and len(pred.failures) == 1
    assert len(engine.of("review")) == 3 + engine_calls - 1  # a parse failure costs DSPy's JSON retry
    assert pred.answer == "done" and [e["titles"] for e in pred.evidence] == [["N1"], ["N3"]]


def test_everything_failing_gives_an_empty_answer_not_an_error():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2,), expansion="direct")
    pred, _ = run(program, lambda call: RuntimeError("server down"))
    assert pred.answer == "" and pred.evidence == []
    assert [f["where"] for f in pred.failures] == ["review@node1", "review@node2", "fuse"]


def test_a_failed_search_ends_the_branch():
    class Broken(FakeRetriever):
        def __init__(self):
            super().__init__("counter")

        def search_batch(self, queries, k):
            if queries[0] != Q:
                raise OSError("index gone")
            return super().search_batch(queries, k)

    program = TreeOfReviews(retriever=Broken(), widths=(1, 1), expansion="direct")
    pred, _ = run(program, always("search", next_query="more"))
    assert pred.failures[0]["where"] == "retrieve@node1" and pred.answer == "42"


# --- interface -------------------------------------------------------------------------------

def test_needs_a_retriever_and_a_question():
    with pytest.raises(ValueError, match="retriever"):
        TreeOfReviews()
    with pytest.raises(ValueError, match="expansion"):
        TreeOfReviews(retriever=tree_retriever(), expansion="bfs")
    with pytest.raises(ValueError, match="fusion"):
        TreeOfReviews(retriever=tree_retriever(), fusion="vote")
    with pytest.raises(ValueError, match="question is empty"):
        TreeOfReviews(retriever=tree_retriever())(question="  ")


def test_tree_is_plain_json():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="cot")
    pred, _ = run(program, answering(_two_pieces))
    data = json.loads(json.dumps({"tree": pred.tree, "evidence": pred.evidence, "failures": pred.failures}))
    root = data["tree"]["nodes"][0]
    assert root["depth"] == 0 and root["parent"] is None and root["query"] == Q
    node = data["tree"]["nodes"][1]
    assert set(node) >= {"id", "title", "depth", "parent", "action", "query", "analysis", "failures"}


def test_predictor_names_avoid_score():
    names = [name for name, _ in TreeOfReviews(retriever=tree_retriever()).named_predictors()]
    assert names == ["review", "complete_paragraph", "fuse"]


def test_save_load_round_trip(tmp_path):
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2))
    program.review.demos = [dspy.Example(question="q", paragraphs=["T: t"], relevant=True, sufficient=False,
                                         action="search", next_query="nq", analysis="")]
    program.fuse.signature = program.fuse.signature.with_instructions("Answer briefly from the evidence.")
    path = tmp_path / "tor.json"
    program.save(str(path))
    saved = path.read_text()
    assert "Facts about" not in saved and "FakeRetriever" not in saved  # no retriever state

    fresh = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2))
    fresh.load(str(path))
    assert fresh.dump_state() == program.dump_state()
    assert fresh.fuse.signature.instructions == "Answer briefly from the evidence."
    fresh.save(str(tmp_path / "again.json"))
    assert (tmp_path / "again.json").read_text() == saved


def test_deepcopy_shares_the_retriever():
    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever)
    clone = copy.deepcopy(program)
    assert clone.retriever is retriever and clone.review is not program.review
    assert program.deepcopy().retriever is retriever


def test_a_failing_encoder_keeps_discovery_order():
    def broken(texts):
        raise OSError("encoder missing")

    program = TreeOfReviews(retriever=tree_retriever(), widths=(4, 4), expansion="direct", embed_fn=broken)
    script = answering(lambda c: review("search", next_query=f"after {c.titles[-1]}"))
    pred, _ = run(program, script)  # 4 + 4 * 4 = 20 paragraphs > 15
    assert len(pred.retrieved) == 20 and pred.failures[-1]["where"] == "rerank"
    assert pred.answer == "42"


# --- concurrent sibling reviews (remote endpoints) -------------------------------------------

def test_threads_review_siblings_concurrently_with_the_same_tree():
    overlap = Overlap(hold=0.05)

    def slow_review(call):
        with overlap:
            pass
        # accept the second child of every node, search the others: the pool grows mid-level
        return review("accept", analysis="found") if call.titles[-1].endswith("2") else review("search", next_query="q")

    script = answering(slow_review)
    serial, _ = run(TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), expansion="direct"), script)
    assert overlap.peak == 1
    parallel, engine = run(TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), expansion="direct", threads=3),
                           script)
    assert overlap.peak > 1
    strip = lambda pred: [{k: v for k, v in n.items() if k != "failures"} for n in pred.tree["nodes"]]  # noqa: E731
    assert strip(parallel) == strip(serial)
    assert parallel.answer == serial.answer and parallel.evidence == serial.evidence
    # every call made in a worker thread reaches the caller's usage tracker (a question's lm_calls)
    lm, engine = scripted_lm(script, classify=review_kind, whole_call=True, usage=(1, 1))
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), expansion="direct", threads=3)
    with dspy.context(lm=lm), dspy.track_usage() as usage:
        program(question=Q)
    assert sum(len(v) for v in usage.usage_data.values()) == len(engine.calls) > 3


def test_threads_must_be_positive():
    with pytest.raises(ValueError, match="threads"):
        TreeOfReviews(retriever=tree_retriever(), threads=0)


# --- hops and the relevance judge --------------------------------------------------------------

def test_hops_searches_on_a_sufficient_path_that_is_too_short():
    """hops=2: the model calls single paragraphs sufficient, but only two-paragraph paths are accepted."""
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct", hops=2)
    pred, engine = run(program, always("accept", analysis="Jane Doe wrote it."))
    assert len(engine.of("review")) == 2 + 4  # both roots searched on, their children accepted
    depth1 = [n for n in pred.tree["nodes"] if n["depth"] == 1]
    assert all(n["action"] == "search" and n["expanded"] and n["sufficient"] for n in depth1)
    assert [len(e["titles"]) for e in pred.evidence] == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="hops"):
        TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), hops=3)


def test_hops_keeps_relevance_pruning():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2, 2), expansion="direct", hops=2)
    pred, engine = run(program, answering(
        lambda c: review("reject") if c.titles[-1] == "N1" else review("accept", analysis="It is 42.")))
    assert [c.titles for c in engine.of("review")] == [["N1"], ["N2"], ["N2", "N3"], ["N2", "N4"]]


def _judged(call):
    """The written verdict always says relevant; only the probability tells gold (G*) from the rest."""
    reply = review("search", next_query="more")
    reply["_p"] = {"relevant": 0.8 if call.titles[-1].startswith("G") else 0.3, "sufficient": 0.1}
    return reply


def test_relevance_threshold_decides_on_the_models_probability():
    retriever = tree_retriever(fixed={Q: [passage("G1"), passage("D1"), passage("G2")]})
    program = TreeOfReviews(retriever=retriever, widths=(3, 1), expansion="direct", relevance_threshold=0.5)
    pred, engine = run(program, answering(_judged))
    depth1 = {n["title"]: n for n in pred.tree["nodes"] if n["depth"] == 1}
    assert {t: n["action"] for t, n in depth1.items()} == {"G1": "search", "D1": "reject", "G2": "search"}
    assert depth1["D1"]["p_relevant"] == pytest.approx(0.3) and depth1["G1"]["p_relevant"] == pytest.approx(0.8)
    assert depth1["G1"]["p_sufficient"] == pytest.approx(0.1)
    assert pred.stats["judge_fallbacks"] == 0


def test_without_a_threshold_the_written_verdict_decides_and_probabilities_are_not_asked():
    retriever = tree_retriever(fixed={Q: [passage("G1"), passage("D1")]})
    program = TreeOfReviews(retriever=retriever, widths=(2, 1), expansion="direct")
    pred, _ = run(program, answering(_judged))
    depth1 = [n for n in pred.tree["nodes"] if n["depth"] == 1]
    assert all(n["action"] == "search" and "p_relevant" not in n for n in depth1)  # a scripted LM: not embedded


def test_a_threshold_without_probabilities_falls_back_to_the_verdict_and_counts_it():
    program = TreeOfReviews(retriever=tree_retriever(), widths=(2,), expansion="direct", relevance_threshold=0.5)
    pred, _ = run(program, always("search", next_query="more"))  # replies carry no log-probabilities
    assert pred.stats["judge_fallbacks"] == 2
    assert [n["action"] for n in pred.tree["nodes"][1:]] == ["search", "search"]  # relevant, as written
    with pytest.raises(ValueError, match="relevance_threshold"):
        TreeOfReviews(retriever=tree_retriever(), relevance_threshold=1.5)


# --- bridge expansion: a short call names the entity the second hop is about -------------------

def test_bridge_names_an_entity_for_the_first_expansions_only_and_stays_in_its_call_bound():
    from treeqa.optimize import max_calls_per_question

    retriever = tree_retriever()
    program = TreeOfReviews(retriever=retriever, widths=(3, 2), expansion="bridge", bridge_calls=2)
    pred, engine = run(program, answering(lambda call: review("search"), bridge=lambda call: "Ada Lovelace"))
    assert len(engine.of("bridge")) == 2 and pred.stats["bridges"] == 2  # three nodes expand, two name
    named = [q for q in retriever.asked if q.startswith("Ada Lovelace ")]
    assert named == [f"Ada Lovelace {Q}"] * 2
    assert sum(q.startswith(f"{Q} N") for q in retriever.asked) == 1  # the third searches as linked does
    assert len(engine.calls) <= max_calls_per_question(program) == TreeOfReviews.call_bound(program.settings)
    # nine reviews, namings at most one per expandable node (three), the reader
    assert TreeOfReviews.call_bound({**program.settings, "bridge_calls": 9}) == 9 + 3 + 1


def test_bridge_settings_are_checked_and_refused_where_they_mean_nothing(tmp_path):
    from tests.fakes import FakeRetriever
    from treeqa.programs.chain_of_reviews import ChainOfReviews
    from treeqa.programs.compiled import load_program, save_compiled

    with pytest.raises(ValueError, match="bridge_calls must be positive"):
        TreeOfReviews(retriever=tree_retriever(), expansion="bridge", bridge_calls=0)
    with pytest.raises(ValueError, match="Tree of Reviews'"):
        ChainOfReviews(retriever=tree_retriever(), expansion="bridge")
    assert "name_bridge" in TreeOfReviews.no_query_writer({"expansion": "bridge", "widths": (5, 3), "depth": None})
    # a linked file run with expansion=bridge: the naming predictor starts zero-shot, the rest is the file's
    linked = TreeOfReviews(retriever=tree_retriever(), expansion="linked", widths=(2, 2))
    linked.fuse.signature = linked.fuse.signature.with_instructions("Answer briefly.")
    path = save_compiled(linked, tmp_path / "tor.json", name="tor", dataset="hotpotqa", retriever="dense")
    bridged = load_program(path, retriever=FakeRetriever(), overrides={"expansion": "bridge"})
    assert bridged.expansion == "bridge" and not bridged.name_bridge.demos
    assert bridged.fuse.signature.instructions == "Answer briefly."
    assert [n for n, _ in load_program(path, retriever=FakeRetriever()).named_predictors()] == ["review", "fuse"]
