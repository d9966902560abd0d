"""The README's app snippet runs as written (a scripted LM and a fake retriever stand in for the
embedded model and the HotpotQA index; the compiled file is the committed one it names)."""

import contextlib
import io
import re
from pathlib import Path

import dspy

import treeqa
from tests.fakes import generic_lm, tree_retriever

ROOT = Path(__file__).resolve().parent.parent


def python_block_after(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S).group(1)


def test_the_app_snippet_loads_the_committed_compiled_program_and_answers(monkeypatch):
    lm = generic_lm({"1900 Olympics": "Paris"}, default_answer="Paris")
    configured = []
    monkeypatch.setattr(treeqa, "configure", lambda name="local", **kw: configured.append(name)
                        or dspy.configure(lm=lm, adapter=dspy.ChatAdapter()))
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *args, **kw: tree_retriever())
    monkeypatch.chdir(ROOT)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(python_block_after("### In an app"), "README.md", "exec"), {})
    assert configured == ["local"] and printed.getvalue().strip() == "Paris"
    assert lm._engine_spec.calls  # the compiled ToR asked the LM, through its reviews and its reader
    dspy.configure(lm=None, adapter=None)
