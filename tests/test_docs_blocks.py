"""Every shell and Python block in README.md and docs/ either runs in a test or says what it needs
(the model, a server, the encoder, the benchmark files), so a reader knows which ones to paste; and
every relative link between the pages names a file (and heading) that exists."""

import contextlib
import io
import re
import shlex
from pathlib import Path

import dspy
import pytest

import treeqa
from tests.fakes import generic_lm, tree_retriever

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUN_BY_A_TEST = "treeqa.load_program(\"benchmarks/runs/hotpotqa-dev100/tor-path-judge/compiled.json\", expect=\"tor\")"
RUN_AS_WRITTEN = "# runs as written in tests/test_docs_blocks.py"  # cheap treeqa commands (no model, no data)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def blocks():
    for page in PAGES:
        for match in BLOCK.finditer(page.read_text()):
            yield page.relative_to(ROOT), match.group(1), match.group(2)


@pytest.mark.parametrize(("page", "lang", "body"), list(blocks()),
                         ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(blocks())])
def test_every_block_runs_in_a_test_or_says_what_it_needs(page, lang, body):
    if lang == "text" or RUN_BY_A_TEST in body or RUN_AS_WRITTEN in body:
        return
    assert re.search(r"#.*\bneeds?\b", body), f"{page}: a block that neither runs in a test nor says what it needs"


def test_the_app_blocks_run_as_written(monkeypatch):
    """README's and docs/apps.md's app block: the committed compiled ToR, a scripted LM, a fake index."""
    apps = [body for _, _, body in blocks() if RUN_BY_A_TEST in body]
    assert len(apps) >= 2
    lm = generic_lm({"1900 Olympics": "Paris"}, default_answer="Paris")
    monkeypatch.setattr(treeqa, "configure", lambda name="local", **kw: dspy.configure(lm=lm,
                                                                                      adapter=dspy.ChatAdapter()))
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *args, **kw: tree_retriever())
    monkeypatch.chdir(ROOT)
    for body in apps:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(body, "docs", "exec"), {})
        assert printed.getvalue().strip() == "Paris"
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
