import pytest

from tests.conftest import SHARED_DATA, requires_shared_data
from treeqa.data import load_corpus, load_split
from treeqa.data.corpus import Passage, passage_id
from treeqa.retrievers import BM25Retriever, DenseRetriever, IndexMissingError, get_retriever
from treeqa.retrievers import store


def _passage(title, text):
    return Passage(passage_id(title, text), title, text)


CORPUS = [
    _passage("Mount Rigi", "Mount Rigi is a mountain in central Switzerland above Lake Lucerne."),
    _passage("Python", "Python is a programming language created by Guido van Rossum."),
    _passage("Espresso", "Espresso is coffee brewed by forcing hot water through finely ground beans."),
    _passage("Lake Lucerne", "Lake Lucerne is a lake in central Switzerland."),
]


@pytest.mark.parametrize("cls", [DenseRetriever, BM25Retriever])
def test_search_ranks_the_relevant_passage_first(cls):
    retriever = cls.build(CORPUS, progress=False)
    hits = retriever.search("Who created the Python programming language?", k=2)
    assert hits[0].title == "Python"
    assert len(hits) <= 2 and hits[0].score >= (hits[1].score if len(hits) > 1 else 0)
    batch = retriever.search_batch(["coffee brewing", "mountain above a lake"], k=1)
    assert [b[0].title for b in batch] == ["Espresso", "Mount Rigi"]


@pytest.mark.parametrize("cls", [DenseRetriever, BM25Retriever])
def test_bad_queries_are_clear_errors(cls):
    retriever = cls.build(CORPUS, progress=False)
    with pytest.raises(ValueError, match="non-empty"):
        retriever.search("   ", k=3)
    with pytest.raises(ValueError, match="k must be positive"):
        retriever.search("lake", k=0)
    with pytest.raises(ValueError, match="empty corpus"):
        cls.build([], progress=False)


def test_bm25_query_of_only_stopwords_returns_nothing():
    assert BM25Retriever.build(CORPUS, progress=False).search("the of and", k=3) == []


@pytest.mark.parametrize("cls", [DenseRetriever, BM25Retriever])
def test_save_load_roundtrip(cls, tmp_path):
    built = cls.build(CORPUS, progress=False)
    built.save(tmp_path / "idx")
    loaded = cls.load(tmp_path / "idx")
    assert loaded.passages == CORPUS
    query = "a lake in Switzerland"
    assert [p.id for p in loaded.search(query, 3)] == [p.id for p in built.search(query, 3)]


@pytest.mark.parametrize("cls", [DenseRetriever, BM25Retriever])
def test_missing_index_names_the_command(cls, tmp_path):
    with pytest.raises(IndexMissingError, match="treeqa index build"):
        cls.load(tmp_path / "nothing")
    with pytest.raises(IndexMissingError, match="treeqa index build --dataset demo"):
        cls.for_corpus(CORPUS, tmp_path, "demo", build=False)


def test_index_is_reused_and_rebuilt_when_corpus_changes(tmp_path, monkeypatch):
    builds = []
    real_build = DenseRetriever.build.__func__

    def counting_build(cls, passages, progress=True):
        builds.append(len(passages))
        return real_build(cls, passages, progress=False)

    monkeypatch.setattr(DenseRetriever, "build", classmethod(counting_build))
    DenseRetriever.for_corpus(CORPUS, tmp_path, "demo")
    DenseRetriever.for_corpus(CORPUS, tmp_path, "demo")
    assert builds == [4]  # second call loaded from disk
    changed = CORPUS[:3] + [_passage("Lake Lucerne", "Lake Lucerne is a lake in Switzerland.")]
    retriever = DenseRetriever.for_corpus(changed, tmp_path, "demo")
    assert builds == [4, 4]
    assert retriever.passages == changed
    assert len([d for d in tmp_path.iterdir() if store.is_complete(d)]) == 2


def test_get_retriever_on_fixture_corpus(fixture_data):
    retriever = get_retriever("hotpotqa", "bm25")
    assert {p.title for p in retriever.passages} == {p.title for p in load_corpus("hotpotqa")}
    assert retriever.search("cog railway Europe 1871", 1)[0].title == "Cog railway"
    with pytest.raises(ValueError, match="unknown retriever"):
        get_retriever("hotpotqa", "splade")


@requires_shared_data
@pytest.mark.integration
def test_dense_finds_gold_paragraph_on_real_pooled_hotpotqa(settings_env):
    """The first dev question (Scott Derrickson / Ed Wood) among ~4k real paragraphs."""
    settings_env(data_dir=SHARED_DATA)
    retriever = get_retriever("hotpotqa", "dense")
    assert len(retriever.passages) > 3000
    example = load_split("hotpotqa", "dev")[0]
    assert example.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    top5 = {p.title for p in retriever.search(example.question, 5)}
    assert top5 & set(example.gold_titles), top5
