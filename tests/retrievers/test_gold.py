"""Gold retrieval (`--retriever gold`): a question's own gold paragraphs and nothing else, for the
reader-alone measure; any other query is refused, not answered with paragraphs a search would
not have found."""

import pytest
from dspy.utils import DummyLM

from tests.fakes import use_lm
from tests.fakes.cli import run_cli
from treeqa.data import DataError, load_split
from treeqa.evaluation.records import read_records
from treeqa.evaluation.runs import EvalSpec, run_evaluation
from treeqa.retrievers import build_corpus_index, get_retriever

RIGI = "Which lake borders the city where the Rigi Railway company is headquartered?"


def test_a_question_gets_its_gold_paragraphs_only(fixture_data):
    retriever = get_retriever("hotpotqa", "gold")
    (first,) = [ex for ex in load_split("hotpotqa", "dev") if ex.question == RIGI]
    found = retriever.search(RIGI, 5)
    assert [p.id for p in found] == first.gold_ids and {p.title for p in found} == {"Rigi Railways", "Vitznau"}
    assert len(retriever.passages) > len(found)  # the corpus has more: only the gold came back
    assert [p.id for p in retriever.search("  " + RIGI.lower().replace(" ", "  "), 1)] == first.gold_ids[:1]
    train = load_split("hotpotqa", "train")[0]  # every split's questions are known
    assert [p.id for p in retriever.search(train.question, 5)] == train.gold_ids


def test_a_query_that_is_not_a_question_of_the_dataset_is_refused(fixture_data):
    retriever = get_retriever("hotpotqa", "gold")
    with pytest.raises(ValueError, match="only the dataset's own questions"):
        retriever.search("Rigi Railways headquarters", 5)
    with pytest.raises(ValueError, match="non-empty"):
        retriever.search(" ", 5)


def test_no_index_of_an_own_corpus(fixture_data, tmp_path):
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "a text"}\n')
    with pytest.raises(DataError, match="no index to build"):
        build_corpus_index(corpus, "mine", kind="gold")


def test_rta_on_gold_retrieval_reads_the_gold_paragraphs(fixture_data, tmp_path, monkeypatch):
    lm = DummyLM({"Rigi": {"answer": "Lake Zurich"}, "Weggis": {"answer": "no"}})
    use_lm(monkeypatch, lm)
    spec = EvalSpec(program="rta", dataset="hotpotqa", split="dev", n=2, retriever="gold")
    result = run_evaluation(spec, tmp_path / "run")
    assert result["summary"]["n"] == 2 and result["data"]["retriever"] == "gold"
    prompts = [entry["messages"][-1]["content"] for entry in lm.history]
    rigi = next(p for p in prompts if "Rigi Railway company" in p)
    assert "Vitznau" in rigi and "Weggis" not in rigi  # the other question's gold is not shown
    records = read_records(tmp_path / "run" / "predictions.jsonl")
    assert all(r["recall@15"] == 1.0 for r in records) and len(records) == 2


def test_gold_is_refused_where_it_would_compile_or_index(fixture_data, tmp_path):
    from treeqa.optimize import OptimizeSpec

    with pytest.raises(ValueError, match="measures reading alone"):
        OptimizeSpec(program="rta", dataset="hotpotqa", train=1, dev=2, retriever="gold")
    result = run_cli("index", "build", "--dataset", "hotpotqa", "--retriever", "gold")
    assert result.exit_code != 0 and "no index to build" in result.output
    built = run_cli("optimize", "--program", "rta", "--retriever", "gold", "--train", "1", "--dev", "1",
                    "--out", str(tmp_path / "o"))
    assert built.exit_code != 0 and "measures reading alone" in built.output and not (tmp_path / "o").exists()
