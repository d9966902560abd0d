"""A retriever kind written outside the package says how it builds, saves and loads its index;
finding the index of a corpus or a file, building it when missing and reusing it otherwise, is
`IndexedRetriever`'s (not copied into each kind)."""

import json

import pytest

from treeqa.data.corpus import Passage, passage_id
from treeqa.retrievers import RETRIEVERS, IndexMissingError, build_corpus_index, corpus_retriever, store
from treeqa.retrievers.indexed import IndexedRetriever


class WordsRetriever(IndexedRetriever):
    """Ranks passages by the question words they hold; its index file is each passage's words."""

    kind = "words"
    index_label = "words"
    file_options = {"lowercase": True}
    fingerprint_options = ("lowercase",)
    kept_options = ("lowercase",)
    builds: list[int] = []

    def __init__(self, passages, words):
        self.passages, self.words = passages, words

    @classmethod
    def model_id(cls):
        return "words-1"

    @classmethod
    def build(cls, passages, progress=True, lowercase=True):
        cls.builds.append(len(passages))
        fold = str.lower if lowercase else str
        return cls(list(passages), [sorted(set(fold(p.as_text()).split())) for p in passages])

    def _write_index(self, folder):
        (folder / "words.json").write_text(json.dumps(self.words))

    @classmethod
    def _from_folder(cls, folder, passages):
        return cls(passages, json.loads((folder / "words.json").read_text()))

    @classmethod
    def _build_stream(cls, passages, folder, meta, *, lowercase):
        cls.build(list(passages), lowercase=lowercase).save(folder, meta)

    @classmethod
    def _file_options(cls, index_type, batch_size, embed_fn, ray_address):
        if index_type != "auto":
            raise ValueError("a words index has no --index")
        return {"lowercase": True}

    def search_batch(self, queries, k):
        self._check(queries, k)
        ranked = []
        for query in queries:
            asked = set(query.lower().split())
            hits = sorted(range(len(self.passages)), key=lambda i: -len(asked & set(self.words[i])))[:k]
            ranked.append([self.passages[i] for i in hits if asked & set(self.words[i])])
        return ranked


CORPUS = [Passage(passage_id(t, x), t, x) for t, x in [
    ("Mount Rigi", "Mount Rigi is a mountain above Lake Lucerne."),
    ("Espresso", "Espresso is coffee brewed under pressure."),
]]


@pytest.fixture
def words(settings_env, tmp_path):
    settings_env(cache_dir=tmp_path / "cache")
    WordsRetriever.builds = []
    RETRIEVERS.register("words", WordsRetriever)
    yield WordsRetriever
    RETRIEVERS.unregister("words")


def test_a_new_kind_gets_its_corpus_index_found_built_once_and_named_when_missing(words, tmp_path):
    with pytest.raises(IndexMissingError, match="treeqa index build --dataset demo --retriever words"):
        words.for_corpus(CORPUS, tmp_path / "idx", "demo", build=False)
    built = words.for_corpus(CORPUS, tmp_path / "idx", "demo")
    again = words.for_corpus(CORPUS, tmp_path / "idx", "demo", build=False)
    assert words.builds == [2] and again.passages == CORPUS
    assert again.search("coffee pressure", 1)[0].title == "Espresso" == built.search("coffee", 1)[0].title
    (folder,) = [d for d in (tmp_path / "idx").iterdir() if store.is_complete(d)]
    meta = json.loads((folder / "meta.json").read_text())
    assert folder.name.startswith("demo-words-") and (meta["kind"], meta["model"]) == ("words", "words-1")


def test_a_new_kind_indexes_a_corpus_file_and_opens_it_again_by_name(words, tmp_path):
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in CORPUS))
    assert isinstance(build_corpus_index(corpus, "mine", kind="words"), words)
    with pytest.raises(ValueError, match="no --index"):
        build_corpus_index(corpus, "mine", kind="words", index_type="Flat")
    assert json.loads((tmp_path / "cache" / "corpora" / "mine.json").read_text())["lowercase"] is True
    reopened = corpus_retriever("mine", build=False, kind="words")
    assert words.builds == [2] and reopened.search("a mountain", 1)[0].title == "Mount Rigi"
    with pytest.raises(TypeError, match="takes no batch_size"):
        words.for_file(corpus, tmp_path / "idx", "mine", batch_size=8)
