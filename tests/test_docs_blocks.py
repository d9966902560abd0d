"""Every shell and Python block in README.md and docs/ either runs in a test or says what it needs
(the model, a server, the encoder, the benchmark files), so a reader knows which ones to paste."""

import contextlib
import io
import re
from pathlib import Path

import dspy
import pytest

import treeqa
from tests.fakes import generic_lm, tree_retriever

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUN_BY_A_TEST = "treeqa.load_program(\"benchmarks/runs/hotpotqa-dev100/tor-path-judge/compiled.json\", expect=\"tor\")"


def blocks():
    for page in PAGES:
        for match in BLOCK.finditer(page.read_text()):
            yield page.relative_to(ROOT), match.group(1), match.group(2)


@pytest.mark.parametrize(("page", "lang", "body"), list(blocks()),
                         ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(blocks())])
def test_every_block_runs_in_a_test_or_says_what_it_needs(page, lang, body):
    if lang == "text" or RUN_BY_A_TEST in body:
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
