import json

import pytest

from treeqa.data import load_corpus
from treeqa.data.corpus import Passage, passage_id
from treeqa.retrievers import BM25Retriever, DenseRetriever, IndexMissingError, get_retriever, store
from treeqa.retrievers.encoder import model_name


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


@pytest.mark.parametrize("cls, index_file", [(DenseRetriever, "index.faiss"), (BM25Retriever, "bm25")])
def test_an_index_folder_keeps_its_layout(cls, index_file, tmp_path):
    """Folders written before the shared save/load (the kind's index files, passages.jsonl and the
    manifest naming kind and model) are what `save` writes and `load` reads: no cache is rebuilt."""
    cls.build(CORPUS, progress=False).save(tmp_path / "idx", {"name": "demo"})
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == sorted([index_file, "meta.json", "passages.jsonl"])
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    model = model_name() if cls is DenseRetriever else store.BM25_MODEL
    assert (meta["kind"], meta["model"], meta["name"], meta["count"]) == (cls.kind, model, "demo", 4)

    by_hand = tmp_path / "by-hand"  # the old save, spelled out
    by_hand.mkdir()
    built = cls.build(CORPUS, progress=False)
    if cls is DenseRetriever:
        import faiss

        faiss.write_index(built.index, str(by_hand / "index.faiss"))
    else:
        built.model.save(str(by_hand / "bm25"))
    store.write_passages(by_hand, CORPUS, {"kind": cls.kind, "model": model})
    assert cls.load(by_hand).search("a lake in Switzerland", 1)[0].title == "Lake Lucerne"


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


def test_a_registered_kind_is_offered_wherever_a_retriever_is_chosen(fixture_data, tmp_path, monkeypatch):
    """`get_retriever` and `build_corpus_index` look the kind up: a kind registered is offered."""
    from treeqa.retrievers import RETRIEVERS, build_corpus_index, registered_corpus
    from treeqa.retrievers.indexed import IndexedRetriever

    asked = []

    class Echo(BM25Retriever):
        kind = "echo"

        @classmethod
        def for_corpus(cls, passages, index_root, name, build=True):
            asked.append(("corpus", name))
            return cls.build(passages, progress=False)

        @classmethod
        def index_file(cls, path, index_root, name, chunk_words, **options):
            asked.append(("file", name))
            return cls.build(CORPUS, progress=False), {"echoed": True}

    assert list(RETRIEVERS) == ["bm25", "dense", "gold"]
    assert issubclass(RETRIEVERS["bm25"], IndexedRetriever) and issubclass(RETRIEVERS["dense"], IndexedRetriever)
    RETRIEVERS.register("echo", Echo)
    try:
        assert isinstance(get_retriever("hotpotqa", "echo"), Echo)
        corpus = tmp_path / "mine.jsonl"
        corpus.write_text(json.dumps({"id": "a", "title": "A", "text": "a text"}) + "\n")
        assert isinstance(build_corpus_index(corpus, "mine", kind="echo"), Echo)
        entry = registered_corpus("mine")
        assert entry["echoed"] is True and entry["name"] == "mine"
        assert asked == [("corpus", "hotpotqa"), ("file", "mine")]
        with pytest.raises(ValueError, match="retriever name 'echo' is taken"):
            RETRIEVERS.register("echo", BM25Retriever)
    finally:
        RETRIEVERS.unregister("echo")
    with pytest.raises(ValueError, match="unknown retriever 'echo'; choose one of bm25, dense, gold"):
        get_retriever("hotpotqa", "echo")




# --- indexes are checked against their manifest ------------------------------------------

def _built(cls, tmp_path, builds):
    real_build = cls.build.__func__

    def counting_build(klass, passages, progress=True):
        builds.append(len(passages))
        return real_build(klass, passages, progress=False)

    return classmethod(counting_build)


def _folder(tmp_path, kind):
    (folder,) = [d for d in tmp_path.iterdir() if d.is_dir() and d.name.startswith(f"demo-{kind}-")]
    return folder


@pytest.mark.parametrize(("cls", "kind", "damage"), [
    (DenseRetriever, "dense", "truncate_index"),
    (BM25Retriever, "bm25", "drop_last_passage"),
    (BM25Retriever, "bm25", "edit_passage"),
])
def test_a_damaged_index_is_found_and_rebuilt_or_refused(cls, kind, damage, tmp_path, monkeypatch):
    builds = []
    monkeypatch.setattr(cls, "build", _built(cls, tmp_path, builds))
    cls.for_corpus(CORPUS, tmp_path, "demo")
    folder = _folder(tmp_path, kind)
    meta = json.loads((folder / store.META_FILE).read_text())
    assert meta["count"] == 4 and store.PASSAGES_FILE in meta["files"]
    if damage == "truncate_index":
        index = folder / "index.faiss"
        index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    elif damage == "drop_last_passage":
        lines = (folder / store.PASSAGES_FILE).read_text().splitlines(keepends=True)
        (folder / store.PASSAGES_FILE).write_text("".join(lines[:-1]))
    else:
        text = (folder / store.PASSAGES_FILE).read_text()
        (folder / store.PASSAGES_FILE).write_text(text.replace("Espresso is coffee", "Espresso is tea"))
    with pytest.raises(store.IndexCorruptError, match="differs from the manifest.*treeqa index build --dataset demo"):
        cls.for_corpus(CORPUS, tmp_path, "demo", build=False)
    rebuilt = cls.for_corpus(CORPUS, tmp_path, "demo")
    assert builds == [4, 4] and rebuilt.passages == CORPUS
    assert cls.for_corpus(CORPUS, tmp_path, "demo", build=False).passages == CORPUS  # sound again
    assert [d.name for d in tmp_path.iterdir() if d.name.startswith((".building", ".old"))] == []


def test_an_index_without_a_manifest_is_not_trusted(tmp_path):
    BM25Retriever.build(CORPUS, progress=False).save(tmp_path / "idx")
    (tmp_path / "idx" / store.META_FILE).write_text('{"kind": "bm25"}')
    with pytest.raises(store.IndexCorruptError, match="lists no files"):
        BM25Retriever.load(tmp_path / "idx")


def test_concurrent_builds_build_once_and_leave_no_debris(tmp_path, monkeypatch):
    import threading

    builds = []
    monkeypatch.setattr(BM25Retriever, "build", _built(BM25Retriever, tmp_path, builds))
    errors, results = [], []

    def worker():
        try:
            results.append(BM25Retriever.for_corpus(CORPUS, tmp_path, "demo"))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 12 and builds == [4]
    assert all(r.passages == CORPUS for r in results)
    assert [d.name for d in tmp_path.iterdir() if d.name.startswith((".building", ".old"))] == []


@pytest.mark.parametrize("cls", [DenseRetriever, BM25Retriever])
def test_datasets_that_share_a_corpus_share_its_index(cls, tmp_path, monkeypatch):
    """NQ, TriviaQA and WebQ search the same passages: the index built for one serves the others."""
    cls.for_corpus(CORPUS, tmp_path, "nq")
    monkeypatch.setattr(cls, "build", classmethod(lambda *a, **k: pytest.fail("built the same corpus again")))
    shared = cls.for_corpus(CORPUS, tmp_path, "triviaqa", build=False)
    assert [p.id for p in shared.passages] == [p.id for p in CORPUS]
    assert [d.name.split("-")[0] for d in tmp_path.iterdir() if store.is_complete(d)] == ["nq"]
    other = CORPUS[:3]  # another corpus under a taken name is still its own index
    with pytest.raises(IndexMissingError):
        cls.for_corpus(other, tmp_path, "triviaqa", build=False)


# benchmarks/faults.md, second round #12: one-line errors, not tracebacks

def test_12_bad_index_manifests_and_faiss_files_are_corrupt_not_crashes(tmp_path):
    import numpy as np

    from treeqa.retrievers import store
    from treeqa.retrievers.dense import INDEX_FILE, DenseRetriever

    folder = tmp_path / "idx"
    folder.mkdir()
    store.write_passages(folder, [], {"kind": "dense"})
    meta = json.loads((folder / store.META_FILE).read_text())
    meta["files"]["x"] = "not a record"
    (folder / store.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(store.IndexCorruptError, match="not a file record"):
        store.verify(folder)
    (folder / INDEX_FILE).write_bytes(np.arange(10, dtype=np.int64).tobytes())  # matches the manifest, not faiss
    store.write_manifest(folder, {"kind": "dense"}, 0)
    with pytest.raises(store.IndexCorruptError, match="not a faiss index"):
        DenseRetriever.load(folder)
