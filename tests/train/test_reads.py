"""The reader's training set: RAFT-style reads, a stable split, yes/no balance, claims refused."""

import json
from collections import Counter

import dspy
import pytest

from tests.fakes.retrievers import FakeRetriever, passage
from treeqa.data.corpus import Passage
from treeqa.data.loaders import DataError
from treeqa.data.passage import split_sentences
from treeqa.lm import TrainableJSONAdapter
from treeqa.programs import build_program
from treeqa.teleprompt.recorded import reader_of
from treeqa.train.reads import (
    EVIDENCE_DISTRACTORS,
    Read,
    Take,
    balance_yes_no,
    build_reads,
    evidence_examples,
    is_validation,
    official_evidence_examples,
    parse_mix,
    read_set,
    reads_of,
    refuse_claimed,
    take_examples,
    write_set,
)

GOLD = [passage("Gold A"), passage("Gold B")]
OTHERS = [passage(f"Other {i}") for i in range(8)]


def example(qid: str, answer: str = "Paris", gold=GOLD) -> dspy.Example:
    return dspy.Example(id=qid, question=f"question {qid}?", answers=[answer],
                        gold_ids=[p.id for p in gold]).with_inputs("question")


def test_a_gold_read_holds_every_gold_paragraph_among_the_best_distractors():
    [read] = [r for r in reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=0)
              if r.kind == "gold"]
    assert len(read.passages) == 5
    assert {"Gold A: Facts about Gold A.", "Gold B: Facts about Gold B."} <= set(read.passages)
    distractors = {p for p in read.passages if p.startswith("Other")}
    assert distractors == {f"Other {i}: Facts about Other {i}." for i in range(3)}
    assert read.answer == "Paris"


def test_own_read_only_where_the_retrieval_already_holds_the_gold():
    holds = [OTHERS[0], GOLD[1], GOLD[0], *OTHERS[1:]]
    kinds = [r.kind for r in reads_of(example("q1"), "d", holds, GOLD, k=5, chars=1000, seed=0, partial_share=0)]
    assert kinds == ["own", "gold"]
    kinds = [r.kind for r in reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=0)]
    assert kinds == ["gold"]


def test_a_partial_read_leaves_out_one_gold_paragraph_and_keeps_the_answer():
    reads = reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=1.0)
    [partial] = [r for r in reads if r.kind == "partial"]
    gold_shown = [p for p in partial.passages if p.startswith("Gold")]
    assert len(gold_shown) == 1 and len(partial.passages) == 5 and partial.answer == "Paris"


def test_reads_are_seeded_per_question_and_change_with_the_seed():
    one = reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=0.5)
    again = reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=0.5)
    assert one == again
    orders = {reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=s, partial_share=0)[0].passages
              for s in range(6)}
    assert len(orders) > 1


def test_a_question_without_gold_in_the_corpus_gives_no_read():
    assert reads_of(example("q1"), "d", OTHERS, [], k=5, chars=1000, seed=0, partial_share=1) == []


def test_a_distractor_holding_a_gold_sentence_is_not_shown_as_a_distractor():
    sentence = passage("", "Paris is the capital of France.")
    holder = passage("France", "France is a country. Paris is the capital of France. It is big.")
    [read] = reads_of(example("q1"), "d", [holder, *OTHERS], [sentence], k=3, chars=1000, seed=0, partial_share=0)
    assert "Paris is the capital of France." in read.passages  # a sentence without title: its text
    assert not any(p.startswith("France:") for p in read.passages)


def test_yes_no_targets_are_balanced_and_others_kept_in_order():
    reads = [Read(f"q{i}", "d", "gold", "?", (), a) for i, a in enumerate(["no", "no", "yes", "Paris", "no", "Rome"])]
    kept, dropped = balance_yes_no(reads)
    answers = [r.answer for r in kept]
    assert dropped == 2 and answers.count("yes") == answers.count("no") == 1
    assert [a for a in answers if a not in ("yes", "no")] == ["Paris", "Rome"]


def test_the_validation_split_is_decided_by_the_id_alone():
    ids = [f"question-{i}" for i in range(2000)]
    held = [i for i in ids if is_validation(i, 0.1)]
    assert 150 < len(held) < 250
    assert held == [i for i in reversed(ids) if is_validation(i, 0.1)][::-1]


def test_a_claim_question_is_refused_by_id_and_by_its_words():
    with pytest.raises(ValueError, match="claim sample"):
        refuse_claimed([example("claimed")], {"claimed"}, set())
    with pytest.raises(ValueError, match="claim sample"):
        refuse_claimed([example("other")], set(), {"question other"})
    refuse_claimed([example("free")], {"claimed"}, {"question other"})


def test_the_built_set_is_written_in_rtas_exact_prompt_with_its_sha256(tmp_path):
    corpus = {p.id: p for p in GOLD + OTHERS}
    examples = [example(f"q{i}", answer) for i, answer in enumerate(["Paris", "yes", "no", "no", "Rome"])]
    built = build_reads([("d", examples)], lambda d: FakeRetriever(fixed={e.question: OTHERS for e in examples}).search,
                        lambda d: corpus, validation_share=0.0, partial_share=0.0)
    assert built.counts["train_reads"] == 4 and built.counts["balance_dropped"] == 1
    program = build_program("rta", FakeRetriever(), k=5)
    _, reader = reader_of(program)
    manifest = write_set(built, tmp_path, reader, TrainableJSONAdapter(), {"seed": 0})
    again = write_set(built, tmp_path / "again", reader, TrainableJSONAdapter(), {"seed": 0})
    assert manifest["reads_sha256"] == again["reads_sha256"]
    reads = read_set(tmp_path)
    first = reads[0]
    user = first["chat"]["messages"][-2]["content"]
    assert first["question"] in user and all(p in user for p in first["passages"])
    assert json.loads(first["chat"]["messages"][-1]["content"]) == {"answer": first["answer"]}


def test_read_set_keeps_the_preferred_reads_per_question(tmp_path):
    lines = [{"id": f"q:{k}", "question_id": "q", "side": "train", "kind": k, "chat": {"messages": []}}
             for k in ("own", "gold", "partial")]
    (tmp_path / "reads.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [r["kind"] for r in read_set(tmp_path, per_question=1)] == ["gold"]
    assert [r["kind"] for r in read_set(tmp_path, per_question=2)] == ["own", "gold"]
    (tmp_path / "reads.jsonl").write_text('{"id": "torn"\n')
    with pytest.raises(DataError, match="not a read"):
        read_set(tmp_path)


def test_yes_no_built_adds_every_gold_and_partial_read_of_a_yes_no_question(tmp_path):
    def line(q, kind, pick, answer):
        return {"id": f"{q}:{kind}", "question_id": q, "side": "train", "kind": kind, "pick": pick,
                "answer": answer, "chat": {"messages": []}}

    lines = [line("y", "own", 0, "Yes"), line("y", "gold", 1, "Yes"), line("y", "partial", 2, "Yes"),
             line("n", "missed", 0, "no"), line("n", "partial", 1, "no"),
             line("p", "missed", 0, "Paris"), line("p", "gold", 1, "Paris")]
    (tmp_path / "reads.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [r["id"] for r in read_set(tmp_path, per_question=1)] == ["y:own", "n:missed", "p:missed"]
    assert [r["id"] for r in read_set(tmp_path, per_question=1, yes_no_built=True)] == [
        "y:own", "y:gold", "y:partial", "n:missed", "n:partial", "p:missed"]


def test_evidence_questions_keep_their_sentences_and_a_stable_id(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps({"question": "Who?", "answer": "Ann", "evidence": ["Ann  did it.", " "]}) + "\n")
    [ex] = evidence_examples(path)
    assert ex.gold_sentences == ["Ann did it."] and ex.id == evidence_examples(path)[0].id
    path.write_text('{"question": "Who?"}\n')
    with pytest.raises(DataError, match="e.jsonl:1"):
        evidence_examples(path)


def _official(tmp_path, records):
    """A data folder holding only HotpotQA's official train file (hand-written records in its layout)."""
    (tmp_path / "data" / "hotpotqa").mkdir(parents=True)
    path = tmp_path / "data" / "hotpotqa" / "hotpot_train_v1.1.json"
    path.write_text(json.dumps(records))
    return path


OFFICIAL = [{"_id": "5a8b57f25542995d1e6f1371", "question": "Who?", "answer": "Ann", "type": "bridge",
             "supporting_facts": [["B", 1], ["A", 0], ["A", 9]],
             "context": [["A", ["Ann  did it. ", "Then left."]], ["B", ["Bob saw.", "Ann was there."]]]},
            {"_id": "x2", "question": "Not one of ours?", "answer": "no", "supporting_facts": [], "context": []}]


def test_the_evidence_questions_are_rebuilt_from_the_official_train_file(tmp_path, settings_env, monkeypatch):
    """Where our 500-question file is absent, the same questions come from the official train file
    (`data get hotpotqa`), found by the hash of their words, as our file gives them."""
    ours = tmp_path / "e.jsonl"
    ours.write_text(json.dumps({"question": "Who?", "answer": "Ann", "type": "bridge",
                                "evidence": ["Ann was there.", "Ann  did it. "]}) + "\n")
    [expected] = evidence_examples(ours)
    ids = tmp_path / "ids.txt"
    ids.write_text(expected.id.removeprefix("hotpotqa-evidence-") + "\n")
    official = _official(tmp_path, OFFICIAL)
    [rebuilt] = official_evidence_examples(official, ids)
    assert rebuilt.toDict() == expected.toDict()  # the facts' order, an out-of-range fact left out
    ids.write_text(ids.read_text() + "0123456789ab\n")
    with pytest.raises(DataError, match="1 of the 2 evidence questions are not in it"):
        official_evidence_examples(official, ids)
    settings_env(data_dir=tmp_path / "data")
    ids.write_text(expected.id.removeprefix("hotpotqa-evidence-") + "\n")
    monkeypatch.setattr("treeqa.train.reads.EVIDENCE_IDS", ids)
    assert [ex.id for ex in take_examples(Take("hotpotqa", "evidence"))] == [expected.id]
    official.unlink()
    with pytest.raises(DataError, match="treeqa data get hotpotqa"):
        take_examples(Take("hotpotqa", "evidence"))


def test_the_evidence_ids_are_our_files_questions_in_its_order():
    from treeqa.data.loaders import data_dir
    from treeqa.train.reads import EVIDENCE_FILE, EVIDENCE_IDS

    root = data_dir()
    if root is None or not (root / EVIDENCE_FILE).is_file():
        pytest.skip("the benchmark files are not here")
    ids = [f"hotpotqa-evidence-{line}" for line in EVIDENCE_IDS.read_text().split()]
    assert ids == [ex.id for ex in evidence_examples(root / EVIDENCE_FILE)]


MIX = {"own": 0.4, "missed": 0.4, "gold": 0.4, "partial": 0.2}


def test_with_a_mix_a_retrieval_missing_the_gold_is_a_missed_read_shown_as_retrieved():
    reads = reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=1.0, mix=MIX)
    assert sorted(r.kind for r in reads) == ["gold", "missed", "partial"]
    [missed] = [r for r in reads if r.kind == "missed"]
    assert missed.passages == tuple(f"Other {i}: Facts about Other {i}." for i in range(5))
    assert missed.answer == "Paris"
    assert sorted(r.pick for r in reads) == [0, 1, 2]
    holds = [GOLD[0], GOLD[1], *OTHERS]
    assert "missed" not in {r.kind for r in reads_of(example("q1"), "d", holds, GOLD, k=5, chars=1000, seed=0,
                                                     partial_share=1.0, mix=MIX)}


def test_the_first_pick_follows_the_mix_and_a_zero_weight_comes_last():
    firsts = Counter()
    for i in range(1000):
        reads = reads_of(example(f"q{i}"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=1.0, mix=MIX)
        firsts[next(r.kind for r in reads if r.pick == 0)] += 1
    assert 340 < firsts["missed"] < 460 and 340 < firsts["gold"] < 460 and 140 < firsts["partial"] < 260
    only_gold = {"missed": 0.0, "gold": 1.0, "partial": 0.0}
    for i in range(20):
        reads = reads_of(example(f"q{i}"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=1.0,
                         mix=only_gold)
        assert next(r.kind for r in reads if r.pick == 0) == "gold"


def test_read_set_takes_the_pick_order_where_the_set_has_one(tmp_path):
    lines = [{"id": f"q:{k}", "question_id": "q", "side": "train", "kind": k, "pick": pick, "chat": {"messages": []}}
             for k, pick in (("missed", 0), ("gold", 2), ("partial", 1))]
    (tmp_path / "reads.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [r["kind"] for r in read_set(tmp_path, per_question=1)] == ["missed"]
    assert [r["kind"] for r in read_set(tmp_path, per_question=2)] == ["missed", "partial"]


def test_a_set_without_a_mix_writes_no_pick_and_no_missed_read(tmp_path):
    corpus = {p.id: p for p in GOLD + OTHERS}
    examples = [example(f"q{i}") for i in range(3)]
    built = build_reads([("d", examples)], lambda d: FakeRetriever(fixed={e.question: OTHERS for e in examples}).search,
                        lambda d: corpus, validation_share=0.0, partial_share=0.0)
    _, reader = reader_of(build_program("rta", FakeRetriever(), k=5))
    write_set(built, tmp_path, reader, TrainableJSONAdapter(), {"seed": 0})
    rows = read_set(tmp_path)
    assert {r["kind"] for r in rows} == {"gold"} and not any("pick" in r for r in rows)


def test_a_mix_is_parsed_and_a_bad_one_refused():
    assert parse_mix("own=0.4, missed=0.4,gold=1") == {"own": 0.4, "missed": 0.4, "gold": 1.0}
    for bad, why in (("oracle=1", "not a read kind"), ("gold=x", "KIND=WEIGHT"), ("gold=-1", "negative"),
                     ("gold=0", "no kind")):
        with pytest.raises(ValueError, match=why):
            parse_mix(bad)


def test_with_a_mix_the_yes_no_balance_is_by_question_so_one_read_each_stays_balanced():
    corpus = {p.id: p for p in GOLD + OTHERS}
    examples = [example(f"q{i}", a) for i, a in enumerate(["no", "no", "no", "yes", "Paris"])]
    built = build_reads([("d", examples)], lambda d: FakeRetriever(fixed={e.question: OTHERS for e in examples}).search,
                        lambda d: corpus, validation_share=0.0, partial_share=1.0, mix=MIX)
    assert built.counts["balance_dropped"] == 2  # two "no" questions, with all their reads
    assert len(built.train) == 3 * 3
    answers = Counter(r.answer for r in built.train if r.pick == 0)
    assert answers == {"no": 1, "yes": 1, "Paris": 1}


def sentence_example(qid: str, answer: str) -> dspy.Example:
    """An evidence question: its gold is a sentence outside the corpus, so its first read is built."""
    return dspy.Example(id=qid, question=f"question {qid}?", answers=[answer], gold_sentences=[f"{answer} it is."],
                        gold_ids=[]).with_inputs("question")


def balanced_answers(groups, by_dataset: bool) -> tuple[Counter, int]:
    corpus = {p.id: p for p in GOLD + OTHERS}
    search = FakeRetriever(fixed={e.question: OTHERS for _, exs in groups for e in exs}).search
    built = build_reads(groups, lambda d: search, lambda d: corpus, validation_share=0.0, partial_share=0.0,
                        mix={"missed": 1.0, "gold": 1e-9}, yes_no_by_dataset=by_dataset)  # missed first
    first = [r for r in built.train if r.pick == 0]
    return Counter((r.dataset, r.answer) for r in first), built.counts["balance_dropped"]


def test_yes_no_by_dataset_balances_each_dataset_where_the_whole_set_would_not():
    groups = [("a", [sentence_example(f"a{i}", x) for i, x in enumerate(["no", "no", "yes", "Paris"])]),
              ("b", [sentence_example(f"b{i}", x) for i, x in enumerate(["yes", "yes", "no", "Rome"])])]
    whole, _ = balanced_answers(groups, by_dataset=False)
    assert whole[("a", "no")] == 2  # 3 yes, 3 no over the set: each dataset stays lopsided
    apart, dropped = balanced_answers(groups, by_dataset=True)
    assert dropped == 2 and apart == {("a", "no"): 1, ("a", "yes"): 1, ("a", "Paris"): 1,
                                      ("b", "yes"): 1, ("b", "no"): 1, ("b", "Rome"): 1}


def test_yes_no_by_dataset_balances_the_programs_own_retrieval_apart_from_built_reads():
    """'no' only where the reader sees its own retrieval and 'yes' only on built reads would teach
    it that its retrieval means 'no': those questions are balanced apart."""
    retrieved = [example("r0", "no"), example("r1", "no")]  # OTHERS miss the gold: a missed read comes first
    built = [sentence_example("s0", "yes"), sentence_example("s1", "yes")]
    groups = [("a", [*retrieved, *built, example("r2", "Paris")])]
    assert balanced_answers(groups, by_dataset=False)[1] == 0
    kept, dropped = balanced_answers(groups, by_dataset=True)
    assert dropped == 4 and kept == {("a", "Paris"): 1}


def test_an_evidence_question_gets_no_own_or_missed_read():
    sentences = dspy.Example(id="e1", question="Who?", answers=["Ann"], gold_sentences=["Ann did it."],
                             gold_ids=[]).with_inputs("question")
    gold = [passage("Ann did it.")]
    reads = reads_of(sentences, "hotpotqa", OTHERS, gold, k=5, chars=1000, seed=0, partial_share=1.0, mix=MIX)
    assert [r.kind for r in reads] == ["gold"]


LONG = [passage(f"Para {i}", f"Para {i} was founded in 19{i}0 by someone. It stands near the river bank. "
                f"St. Ann is a short piece.") for i in range(8)]
SENTENCES = {f"Para {i} was founded in 19{i}0 by someone." for i in range(8)} | {"It stands near the river bank."}


def evidence_reads(distractors: str, seed: int = 0) -> list[Read]:
    ex = dspy.Example(id="e1", question="Who?", answers=["Ann"], gold_sentences=["Ann did it all.", "Bo saw it."],
                      gold_ids=[]).with_inputs("question")
    gold = [Passage(id=f"sent-{i}", title="", text=s) for i, s in enumerate(ex.gold_sentences)]
    return reads_of(ex, "hotpotqa", LONG, gold, k=5, chars=1000, seed=seed, partial_share=1.0,
                    evidence_distractors=distractors)


def test_an_evidence_questions_distractors_are_untitled_sentences_like_its_gold():
    """The gold sentences are untitled: beside titled paragraphs they were findable by form alone."""
    reads = evidence_reads("sentences")
    assert [r.kind for r in reads] == ["gold", "partial"]
    for read in reads:
        assert len(read.passages) == 5
        distractors = [p for p in read.passages if p not in ("Ann did it all.", "Bo saw it.")]
        # one sentence of a paragraph, untitled; a piece under MIN_SENTENCE_CHARS ("St.") is never drawn
        assert set(distractors) <= SENTENCES and len(distractors) == 5 - sum(p in read.passages for p in
                                                                              ("Ann did it all.", "Bo saw it."))
    assert evidence_reads("sentences") == reads  # seeded per question
    assert {r.passages for r in evidence_reads("sentences", seed=1)} != {r.passages for r in reads}


def test_paragraph_distractors_keep_the_sets_before_v5_and_leave_other_questions_alone():
    [gold, _] = evidence_reads("paragraphs")
    assert sum(p.startswith("Para ") for p in gold.passages) == 3
    for kind in EVIDENCE_DISTRACTORS:  # a question with gold paragraphs reads the same either way
        assert reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000, seed=0, partial_share=1.0,
                        evidence_distractors=kind) == reads_of(example("q1"), "d", OTHERS, GOLD, k=5, chars=1000,
                                                              seed=0, partial_share=1.0)
    with pytest.raises(ValueError, match="evidence_distractors"):
        build_reads([], lambda d: None, lambda d: {}, evidence_distractors="titles")


def test_a_paragraph_splits_into_sentences_at_a_stop_before_a_capital():
    assert split_sentences('Ann (born 1950) is a writer.  She won the "Prize." In 1990 she moved. it is 3.5 m') == [
        "Ann (born 1950) is a writer.", 'She won the "Prize."', "In 1990 she moved. it is 3.5 m"]
    assert split_sentences("  ") == []


def test_a_question_template_is_its_last_three_words_unless_one_is_a_name():
    from treeqa.train.reads import question_template

    assert question_template("Are Lecrae and Gawvi of the same nationality?") == "the same nationality"
    assert question_template("Are both Xi'an and Lima located in the same country?") == "the same country"
    assert question_template("Is Paris the capital of France?") == "other"  # a name among the last words
    assert question_template("Yes?") == "other"


def test_yes_no_by_template_balances_each_common_template_on_its_own():
    """Over the dataset 'same country' and 'same nationality' balance each other (10 no and 10
    yes), yet each template alone teaches one answer; a template of a handful goes with the others."""
    from treeqa.train.reads import MIN_TEMPLATE_QUESTIONS, balanced

    n = MIN_TEMPLATE_QUESTIONS

    def read(i: int, template: str, answer: str) -> Read:
        return Read(f"{template}{i}", "2wiki", "gold", f"Are A{i} and B{i} of {template}?", ("p",), answer, pick=0)

    train = ([read(i, "the same country", "no" if i < 8 else "yes") for i in range(n)]
             + [read(i, "the same nationality", "yes" if i < 8 else "no") for i in range(n)]
             + [read(0, "one rare template", "yes")])
    by_dataset, dropped = balanced(train, 0, by_question=True, apart=True)
    assert dropped == 1  # 11 yes against 10 no over the dataset: one yes left out
    kept, dropped = balanced(train, 0, by_question=True, apart=True, by_template=True)
    answers = Counter((r.question.split(" of ")[1], r.answer) for r in kept)
    assert answers[("the same country?", "no")] == answers[("the same country?", "yes")] == 2
    assert answers[("the same nationality?", "yes")] == answers[("the same nationality?", "no")] == 2
    assert dropped == 2 * 6 + 1  # the rare template, balanced with the dataset's other questions (none)


def test_a_set_edited_after_its_manifest_is_refused_where_it_is_read(tmp_path):
    from treeqa.train.reads import write_rows

    rows = [{"id": "q1:gold", "question_id": "q1", "side": "train", "kind": "gold", "answer": "Paris",
             "chat": {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Paris"}]}}]
    write_rows(rows, tmp_path, {}, {})
    assert len(read_set(tmp_path)) == 1
    with (tmp_path / "reads.jsonl").open("a") as f:
        f.write(json.dumps(rows[0] | {"id": "q2:gold", "question_id": "q2"}) + "\n")
    with pytest.raises(DataError, match="edited or torn since it was built"):
        read_set(tmp_path)
