"""Every shell and Python block in README.md and docs/ either runs in a test or says what it needs
(the model, a server, the encoder, the benchmark files), so a reader knows which ones to paste; and
every relative link between the pages names a file (and heading) that exists."""

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import dspy
import pytest

import treeqa
from tests.fakes import generic_lm, tree_retriever
from tests.fakes.lm import Call, generic_responder, use_lm
from tests.fakes.servers import FakeEndpoint
from treeqa.lm import _weights

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# the app blocks a test runs with a scripted LM: each loads one of these committed compiled files
APP_FILES = ("benchmarks/runs/hotpotqa-dev100/tor-path-judge/compiled.json",
             "benchmarks/runs/hotpotqa-dev-unexamined-skip100-n197/tor-priced-compile/compiled.json")
RUN_BY_A_TEST = re.compile(r"treeqa\.load_program\(\s*\"(" + "|".join(map(re.escape, APP_FILES)) + r")\"")
ON_AN_ENDPOINT = "http://127.0.0.1:8080/v1"  # an app block on an endpoint: run against a local scripted server
RUN_AS_WRITTEN = "# runs as written in tests/test_docs_blocks.py"  # cheap treeqa commands (no model, no data)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def blocks():
    for page in PAGES:
        for match in BLOCK.finditer(page.read_text()):
            yield page.relative_to(ROOT), match.group(1), match.group(2)


@pytest.mark.parametrize(("page", "lang", "body"), list(blocks()),
                         ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(blocks())])
def test_every_block_runs_in_a_test_or_says_what_it_needs(page, lang, body):
    if lang == "text" or RUN_BY_A_TEST.search(body) or RUN_AS_WRITTEN in body:
        return
    assert re.search(r"#.*\bneeds?\b", body), f"{page}: a block that neither runs in a test nor says what it needs"


def _app_blocks(on_endpoint: bool) -> list[str]:
    return [body for _, lang, body in blocks()
            if lang == "python" and RUN_BY_A_TEST.search(body) and (ON_AN_ENDPOINT in body) == on_endpoint]


def _fake_index(monkeypatch):
    """A fake index; and the released adapter's tensors are not read against the embedded model's
    header, which a machine without the model lacks (tests/lm/test_adapter_check.py tests that check):
    its size and sha256 still are, and its base hash against the pinned model's."""
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *args, **kw: tree_retriever())
    monkeypatch.setattr("treeqa.lm.adapter.check_adapter", lambda path, base=None: None)
    monkeypatch.setattr("treeqa.lm.base_model_sha256", lambda: _weights.SHA256)  # the pinned model's, installed or not
    monkeypatch.chdir(ROOT)


def _printed(body: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(body, "docs", "exec"), {})
    return printed.getvalue().strip()


def test_the_app_blocks_run_as_written(monkeypatch):
    """README's and docs/apps.md's app blocks on the embedded model: the committed compiled ToR files
    (the main command's with the released reader's adapter), a scripted LM, a fake index."""
    apps = _app_blocks(on_endpoint=False)
    assert len(apps) >= 2 and {RUN_BY_A_TEST.search(body).group(1) for body in apps} == set(APP_FILES)
    lm = use_lm(monkeypatch, generic_lm({"1900 Olympics": "Paris"}, default_answer="Paris"))
    monkeypatch.setattr(treeqa, "configure", lambda name="local", **kw: dspy.configure(lm=lm,
                                                                                      adapter=dspy.ChatAdapter()))
    _fake_index(monkeypatch)
    for body in apps:
        assert _printed(body) == "Paris"
    dspy.configure(lm=None, adapter=None)


def test_the_endpoint_app_block_runs_against_a_server_serving_the_reader(monkeypatch):
    """README's endpoint block, against a scripted OpenAI-compatible server on 127.0.0.1: the search
    asks the base model, the reader asks the model the block names as the adapter's, in its JSON prompt."""
    (body,) = _app_blocks(on_endpoint=True)
    respond = generic_responder({"1900 Olympics": "Paris"}, default_answer="Paris")
    models = []

    def reply(n, request, headers):
        models.append(request["model"])
        text = respond(Call("endpoint", {}, False, request["messages"]))
        if request["model"].endswith("-reader"):  # the trained prompt: one JSON object of the outputs
            fields = re.findall(r"\[\[ ## (\w+) ## \]\]\n(.*?)\n\n", text, re.S)
            text = json.dumps({name: value for name, value in fields if name != "completed"})
        return 200, text, 0

    _fake_index(monkeypatch)
    with FakeEndpoint(reply) as server:
        assert _printed(body.replace(ON_AN_ENDPOINT, server.url)) == "Paris"
    reader = re.search(r'reader_model="openai/([\w-]+)"', body).group(1)
    assert reader in models and set(models) <= {reader, "qwen"}, models  # the reader asks the adapter's name
    dspy.configure(lm=None, adapter=None)


def test_the_command_blocks_run_as_written_and_print_what_the_page_shows():
    """A block marked RUN_AS_WRITTEN holds `treeqa ...` commands that need neither the model nor the
    benchmark files (`optimize ... --plan`); each runs, exits 0, and every line it prints is on its page."""
    from typer.testing import CliRunner

    from treeqa.cli import app

    marked = [(page, body) for page, _, body in blocks() if RUN_AS_WRITTEN in body]
    assert marked
    for page, body in marked:
        text = (ROOT / page).read_text()
        for line in body.splitlines():
            command = line.split("  #")[0].strip()
            if not command or command.startswith("#"):
                continue
            args = shlex.split(command)
            assert args[0] == "treeqa", f"{page}: {command}"
            done = CliRunner().invoke(app, args[1:])
            assert done.exit_code == 0, f"{page}: {command}\n{done.output}"
            for printed in done.output.splitlines():
                assert printed.strip() in text, f"{page}: `{command}` printed a line the page does not show: {printed}"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_relative_links_name_pages_and_headings_that_exist():
    for page in PAGES:
        prose = BLOCK.sub("", page.read_text())
        for target in LINK.findall(prose):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.relative_to(ROOT)}: link to {target}, which does not exist"
            if anchor and linked.suffix == ".md":
                headings = {slug(h) for h in re.findall(r"^#+ (.+)$", BLOCK.sub("", linked.read_text()), re.M)}
                assert anchor in headings, f"{page.relative_to(ROOT)}: link to {target}, a heading that does not exist"
