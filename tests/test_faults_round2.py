"""The second round of faults (benchmarks/faults.md, "Second round"): each test is one scenario
an adversarial user tried, numbered as there, and failed before its fix."""

from __future__ import annotations

import gzip
import json
import threading
import time

import dspy
import pytest
from typer.testing import CliRunner

import treeqa.lm
from tests.fakes import (
    FakeEndpoint,
    answering,
    generic_lm,
    local_client,
    review,
    review_kind,
    scripted_lm,
    tree_retriever,
    use_lm,
)
from treeqa.cli import app, printable
from treeqa.evaluation.records import read_records
from treeqa.evaluation.runs import EvalSpec, run_evaluation
from treeqa.programs import build_program
from treeqa.programs.compiled import CompiledProgramError, load_program, save_compiled
from treeqa.serving import Served, create_app, program_info
from treeqa.serving.app import MAX_BODY_BYTES, Runner

Q = "Which city is the birthplace of the director of Jaws?"
SECRET = "sk-live-0123456789"


@pytest.fixture
def scripted(fixture_data, monkeypatch):
    lm = generic_lm({"Rigi Railway company": "Lake Zurich", "Weggis": "yes"})
    use_lm(monkeypatch, lm)
    return lm


def _cli(*args):
    return CliRunner().invoke(app, list(args))


def _served(script, program="direct"):
    qa = build_program(program, tree_retriever() if program == "tor" else None,
                       **({"widths": [2, 2], "expansion": "direct"} if program == "tor" else {}))
    lm, engine = scripted_lm(script, classify=review_kind, whole_call=True)
    return Served(qa, lm, None, program_info(qa, program, lm, None)), engine


# 1. the body is read no further than its limit, after the queue check ------------------------

def test_1_a_large_body_is_refused_unread_and_the_queue_applies_first():
    served, engine = _served(lambda call: {"answer": "Cincinnati"})
    with local_client(create_app(served, queue_size=0, time_limit=20)) as client:
        big = client.post("/v1/ask", content=b'{"question": "' + b"x" * (MAX_BODY_BYTES * 4) + b'"}',
                          headers={"Content-Type": "application/json"})
        client.app.state.runner._in_flight = 1  # one request running, none may wait
        busy = client.post("/v1/ask", json={"question": Q})
    assert big.status_code == 413 and "at most 65,536" in big.json()["error"]
    assert busy.status_code == 503 and engine.calls == []


# 2. upstream error text never reaches a client ---------------------------------------------

def test_2_upstream_text_stays_in_the_log(caplog):
    def leaky(call):
        return RuntimeError(f"upstream said: Authorization: Bearer {SECRET} at http://10.1.2.3:8000")

    served, _ = _served(leaky)
    with local_client(create_app(served, time_limit=20)) as client:
        body = client.post("/v1/ask", json={"question": Q}).json()
        stream = client.post("/v1/ask/stream", json={"question": Q}).text
    assert SECRET not in json.dumps(body) and "10.1.2.3" not in json.dumps(body) and SECRET not in stream
    assert body["failures"] and body["failures"][0]["message"] == "the language model call failed"
    assert SECRET in caplog.text  # the operator still sees what happened


def test_2_a_crash_is_a_generic_500():
    served, _ = _served(lambda call: {"answer": "x"})
    served.program.forward = lambda question: (_ for _ in ()).throw(ValueError(f"key {SECRET}"))
    with local_client(create_app(served, time_limit=20), raise_server_exceptions=False) as client:
        response = client.post("/v1/ask", json={"question": Q})
    assert response.status_code == 500 and SECRET not in response.text and "error" in response.json()


# 3 and 4. compiled files: finite numbers, bounded size --------------------------------------

def _compiled(tmp_path, edit, name="direct"):
    path = save_compiled(build_program(name), tmp_path / "c.json", name=name, dataset="hotpotqa", retriever="dense")
    text = edit(path.read_text())
    path.write_text(text)
    return path


@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace('"format": 2', '"format": 2, "x": NaN'), "NaN is not a finite number"),
    (lambda t: t.replace('"format": 2', '"format": 2, "x": -Infinity'), "Infinity is not a finite number"),
    (lambda t: json.dumps({**json.loads(t), "answer": {**json.loads(t)["answer"], "demos": [
        {"question": "q", "answer": "a"}] * 200}}), "200 demos; at most 32"),
    (lambda t: json.dumps({**json.loads(t), "answer": {**json.loads(t)["answer"], "demos": [
        {"question": "q" * 30_000, "answer": "a"}]}}), "a demo over 20,000 characters"),
    (lambda t: t.replace('"format": 2', '"format": 2, "x": ' + "[" * 200_000 + "]" * 200_000),
     "nested too deeply"),
    (lambda t: t + " " * (5 << 20), "at most 4,194,304"),
])
def test_3_4_bad_numbers_and_unbounded_files_are_refused(tmp_path, edit, match):
    with pytest.raises(CompiledProgramError, match=match):
        load_program(_compiled(tmp_path, edit))


def test_3_a_judge_with_non_finite_weights_is_refused():
    from treeqa.judging.path_judge import FEATURES, check_path_judge

    logit = {"mean": [0.0] * len(FEATURES), "scale": [1.0] * len(FEATURES), "coef": [0.1] * len(FEATURES),
             "intercept": 0.0, "threshold": 0.5}
    check_path_judge({"relevance": logit, "sufficiency": logit})  # a finite judge loads
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            check_path_judge({"relevance": {**logit, "coef": [bad] * len(FEATURES)}, "sufficiency": logit})


# 5. a refused resume writes nothing ----------------------------------------------------------

def test_5_a_folder_without_spec_json_keeps_its_owner(scripted, tmp_path):
    run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "R")
    (tmp_path / "R" / "spec.json").unlink()
    with pytest.raises(ValueError, match="no spec.json but holds records of another spec"):
        run_evaluation(EvalSpec(program="cot", dataset="hotpotqa", split="dev", n=2), tmp_path / "R")
    assert not (tmp_path / "R" / "spec.json").exists()
    again = run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2), tmp_path / "R")
    assert again["summary"]["n"] == 2  # its own spec still resumes it


# 6. the response cache is kept per endpoint; ask and serve can go without it -------------------

def test_6_two_endpoints_never_share_cached_answers(settings_env, tmp_path):
    settings_env(cache_dir=tmp_path / "cache")
    answers = {}
    for city in ("Paris", "Lyon"):
        with FakeEndpoint(lambda n, body, headers, city=city: (200, f"[[ ## answer ## ]]\n{city}", 0)) as ep:
            lm = treeqa.lm.get_lm("openai/same-name", api_base=ep.url, api_key="k", cache=True)
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                answers[city] = [dspy.Predict("question -> answer")(question="capital?").answer for _ in range(2)]
            assert ep.requests == 1  # the second question came from the cache
    assert answers == {"Paris": ["Paris", "Paris"], "Lyon": ["Lyon", "Lyon"]}


def test_6_ask_without_the_cache(scripted):
    seen = {}
    real = treeqa.lm.get_lm
    treeqa.lm.get_lm = lambda name, **kw: seen.update(kw) or real(name, **kw)
    try:
        _cli("ask", "Is Weggis on the lake?", "--no-cache")
    finally:
        treeqa.lm.get_lm = real
    assert seen.get("cache") is False


# 7. one deadline per call, retries included ---------------------------------------------------

def test_7_a_hung_endpoint_fails_the_call_at_the_deadline(settings_env):
    settings_env(lm_timeout=1.0, lm_retries=3)
    with FakeEndpoint(lambda n, body, headers: (200, "late", 10)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        lm.wait_ready()  # the process's first use of the route is not the call's (tests/test_endpoint_deadline.py)
        started = time.monotonic()
        with pytest.raises(treeqa.lm.EndpointTimeoutError, match=f"{ep.url}: no answer within 1 s"):
            lm("hello")
        assert time.monotonic() - started < 3  # not 4 attempts of 1 s and their back-off
        assert ep.requests == 1


def test_7_transient_errors_are_retried_within_the_deadline(settings_env):
    settings_env(lm_timeout=20, lm_retries=2)
    with FakeEndpoint(lambda n, body, headers: (503, "busy", 0) if n == 0 else (200, "fine", 0)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        assert lm("hello") == ["fine"] and ep.requests == 2
    with FakeEndpoint(lambda n, body, headers: (401, "bad key", 0)) as ep:  # not transient: one request
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        with pytest.raises(Exception) as raised:
            lm("hello")
        assert ep.requests == 1 and ep.url in " ".join(getattr(raised.value, "__notes__", []))


# 8. (tests/test_own_corpus.py: no recall@15 against the dataset's gold ids on your corpus) ----

def test_8_evaluate_compiled_records_the_corpus_it_searched(scripted, tmp_path, monkeypatch):
    path = save_compiled(build_program("rta", tree_retriever()), tmp_path / "c.json", name="rta",
                         dataset="hotpotqa", retriever="dense", extra={"corpus": "mine"})
    asked = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever",
                        lambda dataset, kind, corpus=None: asked.append(corpus) or tree_retriever())
    monkeypatch.setattr("treeqa.retrievers.check_corpus_name", lambda name: None)
    result = _cli("evaluate", "--compiled", str(path), "--n", "1", "--out", str(tmp_path / "R"))
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
    result = _cli("ask", "Is Weggis on the lake?", "--compiled", str(path), "--corpus", "mine", "--no-cache")
    assert result.exit_code == 0, result.output
    assert asked == [("hotpotqa", "dense", "mine")]
    info = load_served(str(path), "direct", "hotpotqa", "bm25", "local", None, corpus="mine").info
    assert asked[-1] == ("hotpotqa", "bm25", "mine") and "mine" in json.dumps(info)
    asked.clear()
    result = _cli("ask", "Is Weggis on the lake?", "--compiled", str(path), "--no-cache")
    assert result.exit_code == 0, result.output
    assert asked == [("hotpotqa", "dense", None)]  # load_program's own default, the compiled-on index
    asked.clear()  # a program that searches nothing builds no index, whatever --corpus says
    direct = save_compiled(build_program("direct"), tmp_path / "d.json", name="direct", dataset="hotpotqa",
                           retriever="dense")
    assert _cli("ask", "Is Weggis on the lake?", "--compiled", str(direct), "--corpus", "mine",
                "--no-cache").exit_code == 0
    assert asked == []


def test_8_compare_pairs_each_program_with_rta_on_the_same_questions(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr("treeqa.evaluation.runs.RUNS_DIR", tmp_path / "runs")
    result = _cli("compare", "--programs", "direct,iterretgen,rta", "--n", "2", "--retriever", "bm25", "--no-cache")
    assert result.exit_code == 0, result.output
    table = result.output.split("Paired on the same questions")[1]
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if " vs rta " in line}
    assert "where both saw all gold" in table and set(rows) == {"direct vs rta", "iterretgen vs rta"}
    # the reading column: both searches found every gold paragraph of both questions (BM25 over the
    # fixture corpus) and both answered them, so no question is one where only iterretgen's search
    # had them all; direct sees no passages, so it has neither column
    assert rows["iterretgen vs rta"].endswith("| 100.0 / 100.0 (2) [+0.00, +0.00], p=1: no significant difference "
                                              "| – |")
    assert rows["direct vs rta"].endswith("| – | – |")
    assert len(list((tmp_path / "runs").rglob("predictions.jsonl"))) == 3  # one folder a program
    typo = _cli("compare", "--programs", "direct,rtaa", "--n", "2", "--no-cache")
    assert typo.exit_code == 1 and "unknown program 'rtaa'" in typo.output
    assert "direct on hotpotqa" not in typo.output  # refused before the first program ran
    unknown = _cli("compare", "--programs", "direct,rta", "--corpus", "nowhere", "--n", "2", "--no-cache")
    assert unknown.exit_code == 1 and "nowhere" in unknown.output and "direct on hotpotqa" not in unknown.output
    assert len(list((tmp_path / "runs").rglob("predictions.jsonl"))) == 3
    assert _cli("compare", "--programs", "direct,rta", "--against", "cot").exit_code == 1


# 9. a compiled.json of another optimizer is not reported under this one's name -----------------

def test_9_an_optimize_folder_that_lost_its_spec_refuses_another_optimizer(scripted, tmp_path):
    from treeqa.optimize import OptimizeSpec, run_optimize

    spec = OptimizeSpec(program="direct", dataset="hotpotqa", optimizer="bootstrap", train=1, dev=2)
    run_optimize(spec, tmp_path / "O")
    (tmp_path / "O" / "spec.json").unlink()
    with pytest.raises(ValueError, match="compiled with 'bootstrap' on 1 train questions, not 'annotated'"):
        run_optimize(spec.model_copy(update={"optimizer": "annotated"}), tmp_path / "O")
    assert not (tmp_path / "O" / "spec.json").exists()


# 10. bad corpus files are one line naming the file, and leave nothing behind -------------------

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
    result = _cli("index", "build", "--corpus", str(corpus), "--name", "docs")
    assert result.exit_code == 1 and str(corpus) in result.output and "Traceback" not in result.output


def test_10_a_directory_is_not_a_corpus(fixture_data, tmp_path):
    result = _cli("index", "build", "--corpus", str(tmp_path), "--name", "docs")
    assert result.exit_code == 1 and "Traceback" not in result.output and str(tmp_path) in result.output


# 11. the in-memory response cache is bounded --------------------------------------------------

def test_11_the_memory_cache_is_bounded(settings_env, tmp_path, monkeypatch):
    settings_env(cache_dir=tmp_path / "cache", memory_cache_entries=64)
    monkeypatch.setattr(treeqa.lm, "_cache_secured", False)
    treeqa.lm.secure_cache()
    assert dspy.cache.memory_cache.maxsize == 64


# 12. one-line errors, not tracebacks ----------------------------------------------------------

def test_12_records_without_numeric_scores_are_skipped(tmp_path, caplog):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b", "em": "1", "f1": 1}\n{"id": "c", "em": 1, "f1": 1.0}\n')
    assert [r["id"] for r in read_records(path)] == ["c"]
    assert "line 1: skipped" in caplog.text and "line 2: skipped" in caplog.text


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


@pytest.mark.parametrize("args", [["--queue", "-1"], ["--time-limit", "0"], ["--concurrency", "0"]])
def test_12_serve_options_out_of_range_are_one_line(args):
    result = _cli("serve", "--program", "direct", *args)
    assert result.exit_code == 1 and result.output.startswith("error: --concurrency must be")


# 13. options that cannot mean what they say ----------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["--question-budget", "0"], "--question-budget must be a positive number"),
    (["--max-errors", "-1"], "--max-errors must be 0"),
    (["--n", "100000"], "--n 100000: hotpotqa dev has 2 questions"),
])
def test_13_options_out_of_range_are_refused_before_any_folder(scripted, tmp_path, args, message):
    result = _cli("evaluate", "--program", "direct", "--out", str(tmp_path / "R"), *args)
    assert result.exit_code == 1 and message in result.output
    assert not (tmp_path / "R").exists()


# 14. what a model writes cannot drive a terminal ------------------------------------------------

def test_14_answers_lose_control_characters_and_are_capped():
    from treeqa.signatures.answer import MAX_ANSWER_CHARS, clean_answer

    assert clean_answer("\x1b[31mParis\x07\u202e") == "[31mParis"
    assert len(clean_answer("x" * 10_000)) == MAX_ANSWER_CHARS
    assert printable("a\x1bb\u202ec") == "a\\x1bb\\u202ec"


# 15. a stream whose client leaves stops its search ----------------------------------------------

def test_15_a_cancelled_search_stops_at_its_next_step():
    served, engine = _served(answering(lambda call: review("search", next_query="more")
                                       if len(call.titles) < 2 else review("accept", analysis="ok"),
                                       answer="Cincinnati"), program="tor")
    full = Runner(served)._answer(Q, None)
    cancel = threading.Event()
    cancel.set()
    calls_before = len(engine.calls)
    stopped = Runner(served)._answer(Q, None, cancel)
    assert stopped["cancelled"] is True and len(engine.calls) - calls_before < full["lm_calls"]


# also: every error has one shape ------------------------------------------------------------------

def test_404_405_and_non_utf8_bodies_are_error_objects():
    served, _ = _served(lambda call: {"answer": "x"})
    with local_client(create_app(served, time_limit=20)) as client:
        missing = client.get("/nothing")
        wrong = client.get("/v1/ask")
        binary = client.post("/v1/ask", content=b'{"question": "\xff\xfe"}',
                             headers={"Content-Type": "application/json"})
    assert (missing.status_code, wrong.status_code, binary.status_code) == (404, 405, 422)
    assert all(set(r.json()) == {"error"} for r in (missing, wrong, binary))
