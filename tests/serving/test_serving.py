"""The HTTP app with scripted LMs: answers, the step stream, the queue, limits and errors;
`treeqa view`; and the page itself in a real headless Chromium."""

import json
import os
import shutil
import threading
import time

import pytest

from tests.fakes import (
    FakeRetriever,
    Overlap,
    answering,
    local_client,
    review,
    review_kind,
    scripted_lm,
    simulated_endpoint,
    tree_retriever,
    use_lm,
)
from treeqa.programs import build_program
from treeqa.serving import Served, create_app, program_info, write_view
from treeqa.serving.app import Runner

Q = "Which city is the birthplace of the director of Jaws?"


def tor_script(call):
    """Search below the first root paragraph, accept its child; reject the other root paragraphs."""
    if call.kind != "review":
        return {"answer": "Cincinnati"} if call.kind == "fuse" else {"missing_paragraph": "more"}
    if call.titles == ["N1"]:
        return review("search", next_query="director birthplace")
    if call.titles[:1] == ["N1"]:
        return review("accept", analysis="He was born in Cincinnati.")
    return review("reject")


def tor_served(script=tor_script, **program_kw):
    program = build_program("tor", tree_retriever(), widths=[2, 2], expansion="direct", **program_kw)
    lm, engine = scripted_lm(script, classify=review_kind, whole_call=True)
    return Served(program, lm, None, program_info(program, "tor", lm, "hotpotqa")), engine


def events_of(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name = next((line[6:].strip() for line in block.splitlines() if line.startswith("event:")), None)
        data = "".join(line[5:].strip() for line in block.splitlines() if line.startswith("data:"))
        if name and data:
            out.append((name, json.loads(data)))
    return out


def test_ask_answers_with_the_tree_passages_and_costs():
    served, engine = tor_served()
    with local_client(create_app(served, time_limit=20)) as client:
        body = client.post("/v1/ask", json={"question": Q}).json()
        info = client.get("/v1/program").json()
        health = client.get("/healthz").json()
        page = client.get("/")
    assert body["answer"] == "Cincinnati" and body["failures"] == []
    assert body["lm_calls"] == len(engine.calls) == 5  # 2 root reviews + 2 child reviews + fusion
    actions = [n["action"] for n in body["tree"]["nodes"]]
    assert actions == ["search", "search", "accept", "accept", "reject"]
    assert [p["title"] for p in body["passages"]][:2] == ["N1", "N3"] and body["seconds"] >= 0
    assert info["program"] == "tor" and info["settings"]["widths"] == [2, 2] and info["demos"]["review"] == 0
    assert health == {"status": "ok"}
    assert page.status_code == 200 and "tree.js" in page.text


def test_the_stream_sends_each_step_as_it_happens_then_the_answer():
    served, _ = tor_served()
    with local_client(create_app(served, time_limit=20)) as client:
        text = client.post("/v1/ask/stream", json={"question": Q}).text
    events = events_of(text)
    names = [name for name, _ in events]
    assert names[-1] == "answer" and set(names[:-1]) == {"step"}
    nodes = [data["node"] for name, data in events if name == "step"]
    assert [n["node"] for n in nodes] == [0, 1, 2, 3, 4]  # depth-first order: root, N1, its children, N2
    assert nodes[1]["action"] == "search" and nodes[2]["action"] == "accept" and nodes[4]["action"] == "reject"
    step_passages = [data["passages"] for name, data in events if name == "step"]
    assert step_passages[0] == [] and step_passages[1][0]["title"] == "N1"
    assert events[-1][1]["answer"] == "Cincinnati"


def test_beam_states_stream_too():
    def script(kind, inputs):
        return {"sub_questions": {"sub_questions": '["who directed Jaws"]'}, "evidence": {"evidence": "Spielberg."},
                "answer": {"answer": "Cincinnati"}, "confidence": {"confidence": "0.5"}}[kind]

    program = build_program("beam", FakeRetriever(), max_queries=1, depth=1, beam_size=2)
    lm, _ = scripted_lm(script)
    with local_client(create_app(Served(program, lm, None, {}), time_limit=20)) as client:
        events = events_of(client.post("/v1/ask/stream", json={"question": Q}).text)
    states = [data["state"] for name, data in events if name == "step"]
    assert [s["id"] for s in states] == [0, 1, 2, 3] and {s["status"] for s in states} == {"kept"}
    assert events[-1][1]["confidence"] == 0.5


class Gate:
    """A script that holds every call until released, to keep a request running."""

    def __init__(self, inner):
        self.inner, self.entered, self.release = inner, threading.Event(), threading.Event()

    def __call__(self, call):
        self.entered.set()
        self.release.wait(10)
        return self.inner(call)


def test_a_full_queue_gets_503_with_retry_after():
    gate = Gate(tor_script)
    served, _ = tor_served(gate)
    with local_client(create_app(served, concurrency=1, queue_size=0, time_limit=20)) as client:
        first = threading.Thread(target=lambda: client.post("/v1/ask", json={"question": Q}))
        first.start()
        assert gate.entered.wait(10)
        busy = client.post("/v1/ask", json={"question": Q})
        assert busy.status_code == 503 and "busy" in busy.json()["error"] and busy.headers["retry-after"]
        assert client.post("/v1/ask/stream", json={"question": Q}).status_code == 503
        gate.release.set()
        first.join(10)
        assert client.post("/v1/ask", json={"question": Q}).status_code == 200  # the slot is free again


def answer_or_error(response) -> str | dict:
    body = response.json()
    return body.get("answer", body)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_against_an_endpoint_requests_are_answered_together(concurrency, monkeypatch):
    """`serve --concurrency N` against an endpoint sends N questions' calls at once (an endpoint
    with capacity answers them together); 1, what the embedded engine gets, sends one at a time."""
    import dspy

    from treeqa.lm import get_lm

    monkeypatch.setenv("OPENAI_API_KEY", "none")
    overlap, statuses = Overlap(hold=0.5), []
    with simulated_endpoint(0, overlap, answer="Paris") as endpoint:
        lm = get_lm("openai/m", api_base=endpoint.url, cache=False)
        lm.wait_ready()  # as serve does at start-up: LiteLLM's first import is not a request's time
        program = build_program("direct")
        served = Served(program, lm, dspy.ChatAdapter(), program_info(program, "direct", lm, None))
        with local_client(create_app(served, concurrency=concurrency, queue_size=4, time_limit=30)) as client:
            ask = [threading.Thread(target=lambda i=i: statuses.append(
                answer_or_error(client.post("/v1/ask", json={"question": f"Question {i}?"})))) for i in range(4)]
            for thread in ask:
                thread.start()
            for thread in ask:
                thread.join(30)
    assert statuses == ["Paris"] * 4 and overlap.peak == concurrency


def test_a_slow_answer_gets_504_and_the_next_request_waits_for_the_engine():
    def slow(call):
        time.sleep(0.3)
        return tor_script(call)

    served, _ = tor_served(slow)
    with local_client(create_app(served, time_limit=0.5)) as client:
        late = client.post("/v1/ask", json={"question": Q})
        assert late.status_code == 504 and "time limit" in late.json()["error"]
        started = time.monotonic()
        second = client.post("/v1/ask", json={"question": Q})  # waits for the first's thread, then runs
        assert second.status_code == 504 and time.monotonic() - started < 5


@pytest.mark.parametrize(("payload", "status", "message"), [
    ({"question": "x" * 2001}, 413, "at most 2,000"),
    ({"question": "   "}, 422, "question is empty"),
    ({"query": Q}, 422, "bad request: body.question"),
])
def test_bad_requests_get_json_errors(payload, status, message):
    served, engine = tor_served()
    with local_client(create_app(served, time_limit=20)) as client:
        response = client.post("/v1/ask", json=payload)
        broken = client.post("/v1/ask", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == status and message in response.json()["error"]
    assert engine.calls == []
    assert broken.status_code == 422 and broken.json()["error"].startswith("bad request")


def test_view_writes_one_html_file_with_every_tree(fixture_data, tmp_path, monkeypatch):
    from treeqa.evaluation.runs import EvalSpec, run_evaluation

    served, _ = tor_served()
    use_lm(monkeypatch, served.lm)
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: tree_retriever())
    spec = EvalSpec(program="tor", dataset="hotpotqa", split="dev", n=2, params={"widths": [2, 2],
                                                                                 "expansion": "direct"})
    run_evaluation(spec, tmp_path / "R")
    path = write_view(tmp_path / "R")
    page = path.read_text()
    assert path.name == "view.html" and "class TreeView" in page and "const RUN = " in page
    run = json.loads(page.split("const RUN = ", 1)[1].split(";</script>", 1)[0])
    assert len(run["runs"]["run"]) == 2 and run["runs"]["run"][0]["tree"]["nodes"]
    with pytest.raises(FileNotFoundError, match="neither report.json"):
        write_view(tmp_path / "nothing")


def test_view_of_an_optimize_run_without_its_zero_shot_side(tmp_path):
    """optimize --no-zero-shot leaves `zero_shot: null` in report.json: the page shows the
    compiled side alone instead of failing on the missing one."""
    from treeqa.serving.view import load_run

    (tmp_path / "compiled").mkdir()
    (tmp_path / "compiled" / "predictions.jsonl").write_text(json.dumps(
        {"id": "q0", "question": "q", "prediction": "a", "em": 1.0, "f1": 1.0}) + "\n")
    (tmp_path / "report.json").write_text(json.dumps({
        "spec": {"program": "tor", "dataset": "musique", "optimizer": "path-judge+reader"},
        "zero_shot": None, "compiled": {"n": 1, "em": 100.0}, "compiled_vs_zero_shot": None}))
    run = load_run(tmp_path)
    assert run["title"] == "tor on musique: compiled (path-judge+reader)"
    assert list(run["runs"]) == ["compiled"] and run["runs"]["compiled"][0]["prediction"] == "a"
    assert write_view(tmp_path).is_file()


# --- the page in a real browser ---------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def live_server():
    """The app on a free loopback port, in a thread; stops by itself after the test."""
    import socket

    import uvicorn

    served, _ = tor_served()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(served, time_limit=30)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_the_page_draws_the_tree_and_shows_a_clicked_node(live_server, tmp_path):
    if CHROMIUM is None:
        if os.environ.get("CI") and os.geteuid() == 0:  # root's `make test` installed it: missing is a fault
            pytest.fail("chromium is missing: `make test` installs Debian's chromium package")
        pytest.skip("no chromium on this machine (`make test` installs it where it runs as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone-sized screen
        page.goto(live_server + "/")
        page.fill("#question", Q)
        page.click("#go")
        page.wait_for_selector("#answer:has-text('Cincinnati')", timeout=20_000)
        nodes = page.locator("#tree button.node")
        assert nodes.count() == 5
        classes = [nodes.nth(i).get_attribute("class") for i in range(5)]
        assert [c.split()[2] for c in classes] == ["root", "search", "accept", "accept", "reject"]
        colour = page.eval_on_selector("#tree button.node.accept", "b => getComputedStyle(b).borderTopColor")
        assert colour == "rgb(26, 127, 55)"  # --accept
        assert "on-path" in classes[2] and "on-path" in classes[1]  # the accepted path is highlighted
        nodes.nth(2).click()
        assert "Facts about N3." in page.inner_text("#detail")
        assert "analysis: He was born in Cincinnati." in page.inner_text("#detail")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        browser.close()


def test_serve_and_view_commands(fixture_data, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from treeqa.cli import app, load_served

    served, _ = tor_served()
    use_lm(monkeypatch, served.lm)
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: tree_retriever())
    started = {}
    monkeypatch.setattr("uvicorn.run", lambda app_, host, port, log_level: started.update(app=app_, port=port))
    result = CliRunner().invoke(app, ["serve", "--program", "tor", "--port", "8123", "--concurrency", "4"])
    assert result.exit_code == 0, result.output
    assert started["port"] == 8123 and "serving tor (zero-shot)" in result.output
    assert started["app"].state.runner.concurrency == 4  # a scripted LM is not the embedded engine
    info = load_served(None, "direct", "hotpotqa", "dense", "local", None).info
    assert info["program"] == "direct" and info["dataset"] is None  # direct searches no corpus
    bad = CliRunner().invoke(app, ["serve", "--program", "nosuch"])
    assert bad.exit_code == 1 and "unknown program 'nosuch'" in bad.output
    missing = CliRunner().invoke(app, ["view", str(tmp_path / "nothing")])
    assert missing.exit_code == 1 and "neither report.json" in missing.output


# benchmarks/faults.md, second round #15: a stream whose client leaves stops its search

def test_15_a_cancelled_search_stops_at_its_next_step():
    served, engine = tor_served(answering(lambda call: review("search", next_query="more")
                                          if len(call.titles) < 2 else review("accept", analysis="ok"),
                                          answer="Cincinnati"))
    full = Runner(served)._answer(Q, None)
    cancel = threading.Event()
    cancel.set()
    calls_before = len(engine.calls)
    stopped = Runner(served)._answer(Q, None, cancel)
    assert stopped["cancelled"] is True and len(engine.calls) - calls_before < full["lm_calls"]
