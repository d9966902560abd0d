"""Your own JSONL corpus: reading and chunking, a streamed resumable dense build, index types,
and `--corpus NAME` wherever a dataset's corpus is accepted. The hashing bag-of-words encoder
of `tests.fakes` stands in for MiniLM so these tests need no model."""

import gzip
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.fakes import hashing_embed, hashing_embed_counting, run_cli, tree_retriever, use_lm
from treeqa.cli import app
from treeqa.data import DataError
from treeqa.data.jsonl_corpus import chunk, read_jsonl_corpus
from treeqa.programs import build_program
from treeqa.programs.compiled import save_compiled
from treeqa.retrievers import BM25Retriever, DenseRetriever, build_corpus_index, get_retriever, store, streaming
from treeqa.retrievers.base import IndexMissingError

DOCS = [
    {"id": "py", "contents": "Python\nPython is a programming language created by Guido van Rossum."},
    {"id": 7, "title": "Espresso", "text": "Espresso is coffee brewed by forcing hot water through ground beans."},
    {"id": "rigi", "title": "Mount Rigi", "text": " ".join(f"w{i}" for i in range(227)) + " mountain lake Lucerne"},
]


def _write(path, docs, gz=False):
    text = "".join(json.dumps(d) + "\n" for d in docs)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


# --- reading -----------------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_both_layouts_and_chunking(tmp_path, gz):
    path = _write(tmp_path / ("c.jsonl.gz" if gz else "c.jsonl"), DOCS, gz)
    passages = list(read_jsonl_corpus(path, chunk_words=100))
    assert [p.id for p in passages] == ["py", "7", "rigi#0", "rigi#1"]  # 230 words: 100 + 130 (a short tail joins)
    assert passages[0].title == "Python" and passages[0].text.startswith("Python is a programming")
    assert {p.title for p in passages[2:]} == {"Mount Rigi"} and passages[3].text.endswith("mountain lake Lucerne")
    assert [p.id for p in read_jsonl_corpus(path, chunk_words=None)] == ["py", "7", "rigi"]


def test_chunk_keeps_a_short_tail_with_the_last_piece():
    words = [str(i) for i in range(230)]
    assert [len(c.split()) for c in chunk(words, 100)] == [100, 130]
    assert [len(c.split()) for c in chunk(words[:160], 100)] == [100, 60]


@pytest.mark.parametrize(("lines", "message"), [
    (['{"id": "a", "contents": "x"}', '{"id": "a", "contents": "y"}'], r"line 2: duplicate id 'a'"),
    (['{"id": "a", "contents": "x"}', "{oops"], r"line 2: not valid JSON"),
    (['{"contents": "no id"}'], r"line 1: a passage needs an 'id'"),
    (['{"id": "a", "text": 42}'], r"line 1: a passage needs 'contents', or 'text'"),
    (["[1, 2]"], r"line 1: expected a JSON object"),
])
def test_bad_lines_name_file_and_line(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=f"bad.jsonl, {message}"):
        list(read_jsonl_corpus(path))


# --- the streamed build ---------------------------------------------------------------------------

def test_streamed_build_searches_and_reads_passages_from_disk(tmp_path):
    path = _write(tmp_path / "c.jsonl", DOCS)
    retriever = DenseRetriever.for_file(path, tmp_path / "idx", "demo", embed_fn=hashing_embed, batch_size=2)
    assert isinstance(retriever.passages, store.PassageStore) and len(retriever.passages) == 4
    retriever_embed = hashing_embed  # queries go through the same stand-in encoder
    scores, rows = retriever.index.search(retriever_embed(["who created the Python programming language"]), 1)
    assert retriever.passages[int(rows[0][0])].id == "py"
    folder = next((tmp_path / "idx").glob("demo-corpus-dense-*"))
    meta = json.loads((folder / store.META_FILE).read_text())
    assert meta["index_type"] == "Flat" and meta["count"] == 4 and "offsets.npy" in meta["files"]
    assert not list((tmp_path / "idx").glob(".building-*")) and not (folder / "vectors.npy").exists()


def test_a_killed_build_resumes_from_its_last_finished_batch(tmp_path):
    docs = [{"id": f"d{i}", "title": f"T{i}", "text": f"document number {i} about topic {i % 7}"} for i in range(50)]
    path = _write(tmp_path / "c.jsonl", docs)
    calls = []

    def dying(texts):
        calls.append(len(texts))
        if len(calls) == 4:
            raise KeyboardInterrupt("killed")  # as a kill would, mid-build
        return hashing_embed(texts)

    with pytest.raises(KeyboardInterrupt):
        DenseRetriever.for_file(path, tmp_path / "idx", "demo", embed_fn=dying, batch_size=8)
    staging = next((tmp_path / "idx").glob(".building-demo-corpus-dense-*"))
    assert json.loads((staging / streaming.PROGRESS_FILE).read_text()) == {"passages": 50, "embedded": 24}
    calls.clear()
    resumed = DenseRetriever.for_file(path, tmp_path / "idx", "demo", embed_fn=hashing_embed_counting(calls),
                                      batch_size=8)
    assert sum(calls) == 50 - 24  # only what was left
    fresh = DenseRetriever.for_file(path, tmp_path / "fresh", "demo", embed_fn=hashing_embed, batch_size=50)
    query = hashing_embed(["document number 17 about topic 3"])
    assert resumed.index.search(query, 5)[1].tolist() == fresh.index.search(query, 5)[1].tolist()
    assert np.allclose(resumed.index.reconstruct_n(0, 50), fresh.index.reconstruct_n(0, 50))


def test_index_types_by_size_or_by_name(tmp_path):
    assert streaming.choose_index(99_999) == "Flat"
    assert streaming.choose_index(1_000_000) == "IVF4096,Flat"
    assert streaming.choose_index(21_000_000).endswith(",SQ8")
    docs = [{"id": f"d{i}", "contents": f"passage {i} on subject {i % 11} and theme {i % 5}"} for i in range(300)]
    path = _write(tmp_path / "c.jsonl", docs)
    ivf = DenseRetriever.for_file(path, tmp_path / "idx", "ivf", index_type="IVF4,Flat", embed_fn=hashing_embed)
    assert type(ivf.index).__name__ == "IndexIVFFlat" and ivf.index.ntotal == 300
    ivf.set_search(nprobe=4)
    assert ivf.index.nprobe == 4
    sq8 = DenseRetriever.for_file(path, tmp_path / "idx", "sq8", index_type="IVF4,SQ8", embed_fn=hashing_embed)
    assert type(sq8.index).__name__ == "IndexIVFScalarQuantizer" and sq8.index.ntotal == 300
    assert sq8.index.search(hashing_embed(["passage 17 on subject 6 and theme 2"]), 1)[1][0][0] == 17
    hnsw = DenseRetriever.for_file(path, tmp_path / "idx", "hnsw", index_type="HNSW16", embed_fn=hashing_embed)
    hnsw.set_search(ef_search=32, nprobe=8)  # nprobe does not apply to HNSW: ignored
    assert hnsw.index.hnsw.efSearch == 32


# --- BM25, streamed ----------------------------------------------------------------------------

BM25_DOCS = [{"id": f"d{i}", "title": f"Topic {i % 7}", "text": f"passage {i} about subject {i % 11} and theme "
              f"{i % 5}" + (" espresso coffee" if i == 23 else "")} for i in range(60)]


def test_a_streamed_bm25_index_ranks_as_the_in_memory_one(tmp_path):
    path = _write(tmp_path / "c.jsonl", BM25_DOCS + [{"id": "stop", "contents": "the and of"}])
    streamed = BM25Retriever.for_file(path, tmp_path / "idx", "demo", batch_size=7)
    assert isinstance(streamed.passages, store.PassageStore) and len(streamed.passages) == 61
    in_memory = BM25Retriever.build(list(read_jsonl_corpus(path)), progress=False)
    for query in ("espresso coffee", "subject 3 theme 4", "Topic 5 passage 12", "the and"):
        assert streamed.search(query, 5) == in_memory.search(query, 5)
    assert streamed.search("espresso", 1)[0].id == "d23"
    folder = next((tmp_path / "idx").glob("demo-corpus-bm25-*"))
    meta = json.loads((folder / store.META_FILE).read_text())
    assert meta["kind"] == "bm25" and meta["count"] == 61
    assert not (folder / streaming.TOKENS_FILE).exists() and not list((tmp_path / "idx").glob(".building-*"))


def test_a_corpus_of_stopwords_is_a_clear_error(tmp_path):
    path = _write(tmp_path / "c.jsonl", [{"id": "a", "contents": "the and of"}, {"id": "b", "contents": "it is"}])
    with pytest.raises(ValueError, match="none of the 2 passages has a word"):
        BM25Retriever.for_file(path, tmp_path / "idx", "stop")
    assert not list((tmp_path / "idx").glob(".building-*"))


def test_a_killed_bm25_build_keeps_its_passages_and_tokenizes_again(tmp_path, monkeypatch):
    import bm25s

    path = _write(tmp_path / "c.jsonl", BM25_DOCS)
    real_index = bm25s.BM25.index

    def killed(self, *args, **kwargs):
        raise KeyboardInterrupt("killed")  # as a kill would, once every passage is tokenized

    monkeypatch.setattr(bm25s.BM25, "index", killed)
    with pytest.raises(KeyboardInterrupt):
        BM25Retriever.for_file(path, tmp_path / "idx", "demo", batch_size=8)
    staging = next((tmp_path / "idx").glob(".building-demo-corpus-bm25-*"))
    assert json.loads((staging / streaming.PROGRESS_FILE).read_text())["passages"] == 60
    monkeypatch.setattr(bm25s.BM25, "index", real_index)
    monkeypatch.setattr(streaming, "_write_passages", lambda *a: pytest.fail("the passages were read again"))
    resumed = BM25Retriever.for_file(path, tmp_path / "idx", "demo", batch_size=8)
    assert resumed.search("espresso coffee", 1)[0].id == "d23"


# --- a named corpus, wherever a dataset's corpus is accepted ------------------------------------

def test_a_registered_corpus_is_searched_by_name(fixture_data, tmp_path, monkeypatch):
    monkeypatch.setattr("treeqa.retrievers.dense.embed", lambda texts, **kw: hashing_embed(texts))
    path = _write(tmp_path / "mine.jsonl", DOCS)
    result = CliRunner().invoke(app, ["index", "build", "--corpus", str(path), "--name", "mine", "--batch-size", "2"])
    assert result.exit_code == 0, result.output
    assert "4 passages" in result.output
    retriever = get_retriever("hotpotqa", corpus="mine")
    assert retriever.search("coffee brewed with hot water", 1)[0].title == "Espresso"
    with pytest.raises(IndexMissingError, match="treeqa index build --corpus-file FILE.jsonl --name other"):
        get_retriever("hotpotqa", corpus="other")
    with pytest.raises(ValueError, match="corpus name"):
        get_retriever("hotpotqa", corpus="../up")
    missing_name = CliRunner().invoke(app, ["index", "build", "--corpus", str(path)])
    assert missing_name.exit_code == 1 and "--name" in missing_name.output
    assert build_corpus_index(path, "mine", embed_fn=hashing_embed).passages == retriever.passages
    bm25 = CliRunner().invoke(app, ["index", "build", "--corpus", str(path), "--name", "mine", "--retriever", "bm25"])
    assert bm25.exit_code == 0 and "BM25" in bm25.output, bm25.output
    sparse = get_retriever("hotpotqa", "bm25", corpus="mine")
    assert isinstance(sparse, BM25Retriever) and sparse.search("Guido van Rossum", 1)[0].id == "py"
    assert get_retriever("hotpotqa", corpus="mine").passages == retriever.passages  # the dense index stays
    with pytest.raises(ValueError, match="--ray and --index are for dense"):
        build_corpus_index(path, "mine", kind="bm25", index_type="HNSW32")
    with pytest.raises(ValueError, match="unknown retriever 'splade'; choose one of bm25, dense, gold"):
        build_corpus_index(path, "mine", kind="splade")


def test_evaluate_with_your_corpus(fixture_data, tmp_path, monkeypatch):
    from tests.fakes import generic_lm
    from treeqa.evaluation.runs import EvalSpec, run_evaluation

    monkeypatch.setattr("treeqa.retrievers.dense.embed", lambda texts, **kw: hashing_embed(texts))
    build_corpus_index(_write(tmp_path / "mine.jsonl", DOCS), "mine", embed_fn=hashing_embed)
    lm = generic_lm({"Rigi": "Lake Zurich"})
    use_lm(monkeypatch, lm)
    plain = EvalSpec(program="rta", dataset="hotpotqa", split="dev", n=1)
    mine = plain.model_copy(update={"corpus": "mine"})
    assert mine.key() != plain.key() and "corpus" not in plain.decisive()  # earlier runs keep their keys
    result = run_evaluation(mine, tmp_path / "R")
    assert result["data"]["corpus"] == "your corpus 'mine'"
    # gold ids name the dataset's pooled paragraphs: another corpus's passages are not scored on them
    assert "recall@15" not in result["records"][0] and "recall@15" not in result["summary"]


# --- Ray: the embedding as a Ray Data job, into the same on-disk format ------------------------

def test_ray_window_resume_and_errors_without_a_cluster(tmp_path, monkeypatch):
    """The Ray path's bookkeeping with a stand-in for Ray Data: rows come back out of order,
    progress is saved per window, and a short reply is an error, not a silent hole."""
    from treeqa.retrievers import ray_embed

    class Dataset:
        def __init__(self, items):
            self.items = items

        def map_batches(self, fn, **kw):
            assert kw["batch_size"] == 4 and kw["concurrency"] == 1 and kw["num_gpus"] == 0
            return self

        def iter_batches(self, **kw):
            for part in (self.items[4:], self.items[:4]):  # out of order, as workers finish
                rows = np.array([it["row"] for it in part])
                yield {"row": rows, "vector": hashing_embed([it["text"] for it in part])}

    class FakeRay:
        data = type("data", (), {"from_items": staticmethod(Dataset)})

        @staticmethod
        def cluster_resources():
            return {"CPU": 2.0}

    monkeypatch.setattr(ray_embed, "connect", lambda address: FakeRay)
    monkeypatch.setattr(ray_embed, "WINDOW_BATCHES", 2)  # windows of 8 passages
    docs = [{"id": f"d{i}", "contents": f"passage {i} on subject {i % 11}"} for i in range(20)]
    path = _write(tmp_path / "c.jsonl", docs)
    saved = []
    real_save = streaming._save_progress
    monkeypatch.setattr(streaming, "_save_progress",
                        lambda folder, p: saved.append(p["embedded"]) or real_save(folder, p))
    built = DenseRetriever.for_file(path, tmp_path / "idx", "r", batch_size=4, ray_address="local")
    assert saved[1:] == [8, 16, 20]  # after writing the passages, then each window
    local = DenseRetriever.for_file(path, tmp_path / "local", "r", batch_size=4, embed_fn=hashing_embed)
    assert np.allclose(built.index.reconstruct_n(0, 20), local.index.reconstruct_n(0, 20))

    class Short(Dataset):
        def iter_batches(self, **kw):
            yield from list(super().iter_batches())[:1]

    FakeRay.data = type("data", (), {"from_items": staticmethod(Short)})
    with pytest.raises(RuntimeError, match="returned 4 vectors for 8 passages"):
        DenseRetriever.for_file(path, tmp_path / "idx2", "r", batch_size=4, ray_address="local")




# benchmarks/faults.md, second round #8: a compiled program searches, and its run names, the corpus it was compiled with

def test_8_evaluate_compiled_records_the_corpus_it_searched(scripted, tmp_path, monkeypatch):
    path = save_compiled(build_program("rta", tree_retriever()), tmp_path / "c.json", name="rta",
                         dataset="hotpotqa", retriever="dense", extra={"corpus": "mine"})
    asked = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever",
                        lambda dataset, kind, corpus=None: asked.append(corpus) or tree_retriever())
    monkeypatch.setattr("treeqa.retrievers.check_corpus_name", lambda name: None)
    result = run_cli("evaluate", "--compiled", str(path), "--n", "1", "--out", str(tmp_path / "R"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "R" / "summary.json").read_text())
    assert asked == ["mine"] and summary["spec"]["corpus"] == "mine"
    assert summary["data"]["corpus"] == "your corpus 'mine'" and "recall@15" not in summary["summary"]


def test_8_ask_and_serve_a_compiled_program_over_your_own_corpus(scripted, tmp_path, monkeypatch):
    """--corpus with --compiled is honoured, not dropped: a program compiled on HotpotQA answers
    from the corpus named (the app's use), and with neither flag it searches what it was compiled on."""
    from treeqa.cli import load_served

    path = save_compiled(build_program("rta", tree_retriever()), tmp_path / "c.json", name="rta",
                         dataset="hotpotqa", retriever="dense")
    asked = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever",
                        lambda dataset, kind, corpus=None: asked.append((dataset, kind, corpus)) or tree_retriever())
    result = run_cli("ask", "Is Weggis on the lake?", "--compiled", str(path), "--corpus", "mine", "--no-cache")
    assert result.exit_code == 0, result.output
    assert asked == [("hotpotqa", "dense", "mine")]
    info = load_served(str(path), "direct", "hotpotqa", "bm25", "local", None, corpus="mine").info
    assert asked[-1] == ("hotpotqa", "bm25", "mine") and "mine" in json.dumps(info)
    asked.clear()
    result = run_cli("ask", "Is Weggis on the lake?", "--compiled", str(path), "--no-cache")
    assert result.exit_code == 0, result.output
    assert asked == [("hotpotqa", "dense", None)]  # load_program's own default, the compiled-on index
    asked.clear()  # a program that searches nothing builds no index, whatever --corpus says
    direct = save_compiled(build_program("direct"), tmp_path / "d.json", name="direct", dataset="hotpotqa",
                           retriever="dense")
    assert run_cli("ask", "Is Weggis on the lake?", "--compiled", str(direct), "--corpus", "mine",
                   "--no-cache").exit_code == 0
    assert asked == []


# benchmarks/faults.md, second round #10: bad corpus files are one line naming the file, and leave nothing behind

@pytest.mark.parametrize(("make", "match"), [
    (lambda p: p.write_bytes(gzip.compress(b"".join(b'{"id": "%d", "contents": "T\\nSome text"}\n' % i
                                                    for i in range(50)))[:-20]),
     "not a complete gzip file"),
    (lambda p: p.write_bytes(b'{"id": "a", "contents": "plain"}\n'), "not a complete gzip file"),
])
def test_10_torn_or_fake_gzip_is_named_and_no_staging_folder_stays(fixture_data, tmp_path, make, match):
    from treeqa.retrievers import build_corpus_index

    corpus = tmp_path / "docs.jsonl.gz"
    make(corpus)
    with pytest.raises(Exception, match=match) as raised:
        build_corpus_index(corpus, "docs", embed_fn=lambda texts: None)
    assert str(corpus) in str(raised.value)
    assert not list((tmp_path / "cache").rglob(".building-*"))
    result = run_cli("index", "build", "--corpus", str(corpus), "--name", "docs")
    assert result.exit_code == 1 and str(corpus) in result.output and "Traceback" not in result.output


def test_10_a_directory_is_not_a_corpus(fixture_data, tmp_path):
    result = run_cli("index", "build", "--corpus", str(tmp_path), "--name", "docs")
    assert result.exit_code == 1 and "Traceback" not in result.output and str(tmp_path) in result.output
