import gzip
import json

import pytest

from tests.fakes import SHARED_DATA, requires_shared_data
from treeqa.data import DataError, load_corpus, load_examples, load_split
from treeqa.data.corpus import passage_id


def test_hotpot_layout(fixture_data):
    dev = load_split("hotpotqa", "dev")
    assert [ex.id for ex in dev] == ["hp-dev-1", "hp-dev-2"]
    ex = dev[0]
    assert ex.answers == ["Lake Zurich"]
    assert ex.gold_titles == ["Rigi Railways", "Vitznau"]
    assert set(ex.inputs().keys()) == {"question"}


def test_2wiki_and_musique_layouts(fixture_data):
    (wiki,) = load_split("2wikimultihopqa", "dev")
    assert wiki.answers == ["Kari Berg"] and wiki.gold_titles == ["Film A", "Ola Lund"]
    (mus,) = load_split("musique", "train")
    assert mus.answers == ["central Switzerland", "Central Switzerland region"]
    assert mus.gold_titles == ["Weggis", "Lake Lucerne"]  # is_supporting only


def test_open_domain_layouts(fixture_data):
    nq_test = load_split("nq", "test")
    assert nq_test[0].answers == ["Niklaus Riggenbach", "Riggenbach"]
    nq_dev = load_split("nq", "dev")
    # the DPR TSV quotes a list that holds quotes: read with csv, then as a Python literal
    assert nq_dev[1].question == 'who said "hello world" first'
    assert nq_dev[1].answers == ["Brian Kernighan", "Kernighan's book"]
    assert load_split("triviaqa", "dev")[0].answers == ["Lake Lucerne", "Vierwaldstättersee"]
    assert load_split("webq", "train")[0].answers == ["Lucerne"]
    assert load_split("webq", "test")[0].question.startswith("what language")


def test_sampling_is_seeded_and_extends(settings_env):
    settings_env(data_dir=SHARED_DATA) if SHARED_DATA.is_dir() else pytest.skip("no shared data")
    a = load_examples("nq", "test", n=20, seed=3)
    b = load_examples("nq", "test", n=20, seed=3)
    c = load_examples("nq", "test", n=40, seed=3)
    assert [x.id for x in a] == [x.id for x in b]
    assert [x.id for x in c[:20]] == [x.id for x in a]
    assert [x.id for x in load_examples("nq", "test", n=20, seed=4)] != [x.id for x in a]
    # skip leaves out the first ones of the same order: a sample beyond the examined ones
    d = load_examples("nq", "test", n=20, seed=3, skip=20)
    assert [x.id for x in d] == [x.id for x in c[20:]]
    assert not {x.id for x in d} & {x.id for x in a}
    with pytest.raises(ValueError, match="none left after skipping"):
        load_examples("nq", "test", n=5, seed=3, skip=10_000)


def test_unknown_names_are_clear(fixture_data):
    with pytest.raises(DataError, match="unknown dataset"):
        load_split("squad", "dev")
    with pytest.raises(DataError, match="available: dev, test"):
        load_split("nq", "train")


def test_the_dataset_tables_are_read_only_views_of_the_registry(fixture_data, tmp_path):
    """SPLITS, DATASETS and EVAL_SPLITS read the registry: a dataset registered is in all three
    and loads like the others; a name another dataset holds is refused."""
    from treeqa.data import DATASETS, EVAL_SPLITS, SPLITS
    from treeqa.data.loaders import REGISTRY, Dataset, SplitFile, register

    # one file each in treeqa/data/datasets, registered in the order of their file names
    assert list(DATASETS) == ["hotpotqa", "musique", "nq", "triviaqa", "2wikimultihopqa", "webq"]
    assert dict(EVAL_SPLITS) == {"hotpotqa": "dev", "2wikimultihopqa": "dev", "musique": "dev",
                                 "nq": "test", "triviaqa": "test", "webq": "test"}
    assert SPLITS["nq"]["test"] == SplitFile("nq/NQ-open.test.jsonl", "qa_jsonl")
    assert list(SPLITS["nq"]) == ["dev", "test"]
    with pytest.raises(TypeError):
        SPLITS["nq"]["train"] = SplitFile("x", "qa_jsonl")
    assert not hasattr(SPLITS, "__setitem__") and not hasattr(EVAL_SPLITS, "__setitem__")
    with pytest.raises(ValueError, match="its evaluation split 'test' is not one of its splits"):
        Dataset("odd", {"dev": SplitFile("x", "qa_jsonl")}, eval_split="test")

    register(Dataset("webq-again", {"test": SplitFile("webq/webq-test.jsonl", "qa_jsonl")}, eval_split="test"))
    try:
        assert "webq-again" in DATASETS and EVAL_SPLITS["webq-again"] == "test"
        assert list(SPLITS["webq-again"]) == ["test"]
        again, webq = load_split("webq-again", "test"), load_split("webq", "test")
        assert [ex.question for ex in again] == [ex.question for ex in webq]
        with pytest.raises(ValueError, match="dataset name 'nq' is taken"):
            register(Dataset("nq", {"test": SplitFile("nq/NQ-open.test.jsonl", "qa_jsonl")}, eval_split="test"))
    finally:
        REGISTRY.unregister("webq-again")
    with pytest.raises(DataError, match="unknown dataset 'webq-again'; choose one of hotpotqa, musique"):
        load_split("webq-again", "test")


def test_missing_file_names_path(settings_env, tmp_path):
    settings_env(data_dir=tmp_path, cache_dir=tmp_path / "cache")
    with pytest.raises(DataError, match=r"hotpotqa/hotpot_dev_distractor_subset.json"):
        load_split("hotpotqa", "dev")


def _data_dir_with(tmp_path, rel, content):
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def test_malformed_jsonl_names_file_and_line(settings_env, tmp_path):
    good = json.dumps({"question": "q", "answer": ["a"]})
    path = _data_dir_with(tmp_path, "nq/NQ-open.test.jsonl", f"{good}\n{{broken\n")
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=rf"{path}, line 2: not valid JSON"):
        load_split("nq", "test")


def test_record_missing_field_names_record(settings_env, tmp_path):
    _data_dir_with(tmp_path, "hotpotqa/hotpot_train_subset.json",
                   json.dumps([{"_id": "x", "question": "q", "answer": "a"}, {"_id": "y", "answer": "a"}]))
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"record 1: malformed hotpot record \(missing field 'question'\)"):
        load_split("hotpotqa", "train")


def test_bad_tsv_and_empty_question(settings_env, tmp_path):
    _data_dir_with(tmp_path, "triviaqa/trivia-dev.qa.tsv", "ok?\t['yes']\nno answers here\n")
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"line 2: malformed dpr_tsv record \(expected 2 tab-separated"):
        load_split("triviaqa", "dev")
    _data_dir_with(tmp_path, "triviaqa/trivia-test.qa.tsv", "  \t['yes']\n")
    with pytest.raises(DataError, match="line 1: empty question"):
        load_split("triviaqa", "test")


def test_gold_answers_that_normalise_to_nothing_are_dropped_or_the_record_skipped(settings_env, tmp_path, caplog):
    _data_dir_with(tmp_path, "nq/NQ-open.test.jsonl",
                   '{"question": "q1", "answer": ["The", "Paris"]}\n{"question": "q2", "answer": ["The"]}\n'
                   '{"question": "q3", "answer": [1990]}\n')
    settings_env(data_dir=tmp_path)
    examples = load_split("nq", "test")
    assert [ex.question for ex in examples] == ["q1", "q3"]
    assert examples[0].answers == ["Paris"] and examples[1].answers == ["1990"]  # a number is written out
    assert "line 2: skipped" in caplog.text and "NQ-open.test.jsonl" in caplog.text


def test_a_gold_answer_of_another_type_names_file_and_line(settings_env, tmp_path):
    _data_dir_with(tmp_path, "nq/NQ-open.test.jsonl", '{"question": "q1", "answer": [{"a": 1}]}\n')
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"NQ-open.test.jsonl, line 1: a gold answer must be a string"):
        load_split("nq", "test")


def test_gold_paragraphs_are_identified_by_title_and_text(settings_env, tmp_path):
    record = {"id": "m1", "question": "q", "answer": "Lucerne", "answer_aliases": [], "answerable": True,
              "question_decomposition": [],
              "paragraphs": [
                  {"idx": 0, "title": "Weggis", "paragraph_text": "Weggis is a  town.", "is_supporting": True},
                  {"idx": 1, "title": "Weggis", "paragraph_text": "Weggis has a port.", "is_supporting": False}]}
    _data_dir_with(tmp_path, "musique/musique_ans_dev_subset.jsonl", json.dumps(record) + "\n")
    settings_env(data_dir=tmp_path)
    (ex,) = load_split("musique", "dev")
    assert ex.gold_titles == ["Weggis"]
    assert ex.gold_ids == [passage_id("Weggis", "Weggis is a town.")]  # whitespace as the corpus stores it


def test_gold_ids_are_corpus_ids(fixture_data):
    corpus_ids = {p.id for p in load_corpus("hotpotqa")}
    for ex in load_split("hotpotqa", "dev"):
        assert ex.gold_ids and set(ex.gold_ids) <= corpus_ids
        assert len(ex.gold_ids) == len(ex.gold_titles)


def test_a_file_that_is_not_utf8_names_file_and_line(settings_env, tmp_path):
    path = tmp_path / "nq" / "NQ-open.test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"question": "q1", "answer": ["x"]}\n{"question": "caf\xe9", "answer": ["y"]}\n')
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"NQ-open.test.jsonl, line 2: not UTF-8"):
        load_split("nq", "test")


def test_a_tsv_field_over_the_csv_limit_names_file_and_line(settings_env, tmp_path):
    _data_dir_with(tmp_path, "triviaqa/trivia-dev.qa.tsv", "ok?\t['yes']\n\"" + "x" * 200_000 + "\"\t['no']\n")
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"trivia-dev.qa.tsv, line 2: not a readable TSV row"):
        load_split("triviaqa", "dev")


def test_corpus_paragraph_without_text_names_file_and_line(settings_env, tmp_path):
    record = {"id": "m", "question": "q", "answer": "x", "paragraphs": [
        {"idx": 0, "title": "T", "paragraph_text": None, "is_supporting": True}]}
    for rel in ("musique/musique_ans_dev_subset.jsonl", "musique/musique_ans_train_subset.jsonl"):
        _data_dir_with(tmp_path, rel, json.dumps(record) + "\n")
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"musique_ans_dev_subset.jsonl, line 1: malformed paragraphs "
                                        r"\(paragraph_text must be text"):
        load_corpus("musique")


def test_wikipedia_leads_of_the_wrong_shape_are_named(settings_env, tmp_path):
    _data_dir_with(tmp_path, "wikipedia/vital_articles_en.json", json.dumps([{"title": "A", "extract": "a"}]))
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"vital_articles_en.json: expected an object of articles"):
        load_corpus("nq")


def test_corpus_pools_dedupes_and_has_stable_ids(fixture_data):
    corpus = load_corpus("hotpotqa")
    keys = [(p.title, p.text) for p in corpus]
    assert len(keys) == len(set(keys))
    # Rigi Railways and Vitznau appear in two records each but are pooled once
    assert sorted(p.title for p in corpus) == ["Cog railway", "Lake Zurich", "Rigi Railways", "Vitznau", "Weggis"]
    rigi = next(p for p in corpus if p.title == "Rigi Railways")
    assert rigi.text == "Rigi Railways runs cog trains on Mount Rigi. Its head office is in Vitznau."
    assert rigi.id == passage_id(rigi.title, rigi.text)
    assert [p.id for p in load_corpus("hotpotqa")] == [p.id for p in corpus]


def test_corpus_with_wikipedia_and_open_domain(fixture_data):
    assert {p.title for p in load_corpus("hotpotqa", with_wikipedia=True)} >= {"Lake Lucerne", "Cog railway"}
    nq = load_corpus("nq")
    assert {p.title for p in nq} == {"Lake Lucerne", "Cog railway", "Rigi Railways"}
    assert load_corpus("webq") == nq


def test_nq_test_questions_get_their_gold_passage_from_the_oracle_file(fixture_data):
    first, second = load_split("nq", "test")[:2]
    # the oracle file lists the first question with its passage: its id is the corpus id, so
    # recall@k counts it; a question the oracle does not list has no gold (its passage is not in the corpus)
    rigi = next(p for p in load_corpus("nq") if p.title == "Rigi Railways")
    assert first.gold_ids == [rigi.id] and first.gold_titles == ["Rigi Railways"]
    assert "gold_ids" not in second
    assert all("gold_ids" not in ex for ex in load_split("nq", "dev"))  # dev questions' passages are not there


def test_a_malformed_nq_oracle_line_is_named(settings_env, tmp_path):
    _data_dir_with(tmp_path, "nq/NQ-open.test.jsonl", '{"question": "q1", "answer": ["a"]}\n')
    with gzip.open(tmp_path / "nq" / "nq-open-oracle.jsonl.gz", "wt") as fh:
        fh.write('{"question": "q1", "ctxs": [{"title": "T", "text": "t"}]}\n{"question": "q2", "ctxs": [{}]}\n')
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"nq-open-oracle.jsonl.gz, line 2: malformed record"):
        load_split("nq", "test")


# faults.md, fifth round: a cut or non-gzip NQ gold file ended in "Aborted." or a 67-line traceback
def test_5_a_cut_or_foreign_nq_oracle_file_is_one_line_naming_it(settings_env, tmp_path):
    _data_dir_with(tmp_path, "nq/NQ-open.test.jsonl", '{"question": "q1", "answer": ["a"]}\n')
    oracle = tmp_path / "nq" / "nq-open-oracle.jsonl.gz"
    whole = gzip.compress(b'{"question": "q1", "ctxs": [{"title": "T", "text": "t"}]}\n' * 200)
    settings_env(data_dir=tmp_path)
    for body in (whole[: len(whole) // 2], b"question\tanswer\n"):  # cut short; not gzip at all
        oracle.write_bytes(body)
        with pytest.raises(DataError, match=r"nq-open-oracle.jsonl.gz: not a whole gzip file"):
            load_split("nq", "test")


def test_empty_corpus_is_an_error(settings_env, tmp_path):
    for rel in ("musique/musique_ans_dev_subset.jsonl", "musique/musique_ans_train_subset.jsonl"):
        _data_dir_with(tmp_path, rel, "")
    settings_env(data_dir=tmp_path)
    with pytest.raises(DataError, match="corpus is empty"):
        load_corpus("musique")


@requires_shared_data
@pytest.mark.parametrize("dataset, split, count", [
    ("hotpotqa", "dev", 297), ("hotpotqa", "train", 100), ("2wikimultihopqa", "dev", 164),
    ("2wikimultihopqa", "train", 500), ("musique", "dev", 200), ("musique", "train", 100),
    # NQ: 2 records each whose only gold answers normalise to nothing ("(", "---") are skipped
    ("nq", "test", 3608), ("nq", "dev", 8755), ("triviaqa", "dev", 8837), ("triviaqa", "test", 11313),
    ("webq", "train", 3778), ("webq", "test", 2032),
])
def test_real_files_load_completely(settings_env, dataset, split, count):
    settings_env(data_dir=SHARED_DATA)
    examples = load_split(dataset, split)
    assert len(examples) == count
    assert all(ex.question.strip() and ex.answers for ex in examples)
    if dataset in ("hotpotqa", "2wikimultihopqa", "musique"):
        assert all(ex.gold_titles and ex.gold_ids for ex in examples)


@requires_shared_data
def test_real_pooled_hotpot_corpus_holds_gold_paragraphs(settings_env):
    settings_env(data_dir=SHARED_DATA)
    corpus = load_corpus("hotpotqa")
    titles, ids = {p.title for p in corpus}, {p.id for p in corpus}
    for ex in load_split("hotpotqa", "dev"):
        assert set(ex.gold_titles) <= titles and set(ex.gold_ids) <= ids
