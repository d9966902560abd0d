"""One way to extend: a program, a compiler, a retriever kind and a dataset are each one module
outside the package, named in its kind's plugin variable (TREEQA_PROGRAMS, TREEQA_COMPILERS,
TREEQA_RETRIEVERS, TREEQA_DATASETS) and found by the same rule (`treeqa.registry.discover`).
Each row of the table adds one, and the same test finds, lists and uses it."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

PROGRAM = '''
import dspy

from treeqa.programs.contract import QAProgram


class FirstWord(QAProgram):
    """Answers with the question's last word: a program that needs no LM."""

    name = "ext-program"

    @classmethod
    def call_bound(cls, settings):
        return 0

    def forward(self, question):
        return dspy.Prediction(answer=question.rstrip("?").split()[-1], failures=[], retrieved=[],
                               tree={"question": question, "nodes": []})
'''

COMPILER = '''
from treeqa.teleprompt.base import Compiler, register


class Stamp:
    """A teleprompter that marks the program it compiled."""

    def compile(self, student, trainset):
        student.stamped = len(trainset)
        return student


register(Compiler("ext-compiler", build=lambda context: (Stamp(), {}), call_bound=lambda per_q, n, tuning: 0))
'''

RETRIEVER = '''
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.indexed import RETRIEVERS


class WordOverlap(Retriever):
    """Passages by the number of words they share with the query; no index on disk."""

    kind = "ext-retriever"

    def __init__(self, passages):
        self.passages = list(passages)

    @classmethod
    def for_corpus(cls, passages, index_dir, name, build=True):
        return cls(passages)

    def search_batch(self, queries, k):
        def shared(query, passage):
            return len(set(query.lower().split()) & set(passage.text.lower().split()))

        return [sorted(self.passages, key=lambda p: -shared(q, p))[:k] for q in queries]


RETRIEVERS.register(WordOverlap.kind, WordOverlap)
'''

DATASET = '''
from treeqa.data.loaders import Dataset, Layout, SplitFile, example, register, register_layout
from treeqa.data.sources import Remote, Source, register_source


def parse(rec, where):
    return example(where, rec["q"], [rec["a"]])


register_layout(Layout("ext-qa", parse))
register(Dataset("ext-dataset", {"dev": SplitFile("ext/dev.jsonl", "ext-qa")}, eval_split="dev", corpus="open"))
register_source(Source("ext-dataset", (Remote("https://example.org/dev.jsonl", {"": "ext/dev.jsonl"}),),
                       homepage="https://example.org", licence="CC0", size="1 KB"))
'''


def _use_program(tmp_path) -> None:
    from treeqa.programs import build_program

    assert build_program("ext-program")(question="Where is Vitznau?").answer == "Vitznau"


def _use_compiler(tmp_path) -> None:
    import dspy

    from treeqa.teleprompt import compilers

    teleprompter, kwargs = compilers()["ext-compiler"].build(None)
    compiled = teleprompter.compile(dspy.Module(), trainset=[1, 2], **kwargs)
    assert compiled.stamped == 2


def _use_retriever(tmp_path) -> None:
    from treeqa.retrievers import get_retriever

    hits = get_retriever("hotpotqa", kind="ext-retriever").search("Rigi Railways Vitznau", 2)
    assert len(hits) == 2 and "Vitznau" in hits[0].text + hits[0].title


def _use_dataset(tmp_path) -> None:
    from treeqa.data import load_split

    (tmp_path / "data" / "ext").mkdir(parents=True)
    (tmp_path / "data" / "ext" / "dev.jsonl").write_text('{"q": "Which lake is Vitznau on?", "a": "Lake Lucerne"}\n')
    (example,) = load_split("ext-dataset", "dev")
    assert (example.question, example.answers) == ("Which lake is Vitznau on?", ["Lake Lucerne"])


def _discover(kind: str) -> None:
    if kind == "programs":
        from treeqa.programs import discover
    elif kind == "compilers":
        from treeqa.teleprompt import compilers

        compilers(refresh=True)
        return
    elif kind == "retrievers":
        from treeqa.retrievers import discover
    else:
        from treeqa.data import discover
    discover()


def _registry(kind: str):
    if kind == "programs":
        from treeqa.programs import PROGRAMS as registry
    elif kind == "compilers":
        from treeqa.teleprompt import COMPILERS as registry
    elif kind == "retrievers":
        from treeqa.retrievers import RETRIEVERS as registry
    else:
        from treeqa.data.loaders import REGISTRY as registry
    return registry


def _listed(kind: str, name: str) -> bool:
    """Where a user sees the choices: `treeqa programs`, `--optimizer`'s names, `--retriever`'s
    error for an unknown kind, `treeqa data list`."""
    from treeqa.cli import app

    if kind == "programs":
        return any(line.startswith(f"{name}:") for line in CliRunner().invoke(app, ["programs"]).output.splitlines())
    if kind == "compilers":
        from treeqa.optimize.spec import optimizer_names

        return name in optimizer_names()
    if kind == "retrievers":
        return name in _registry(kind).unknown("no-such-kind")
    return any(line.startswith(f"{name} ") for line in CliRunner().invoke(app, ["data", "list"]).output.splitlines())


@dataclass(frozen=True)
class Row:
    kind: str  # the plugin variable is TREEQA_<KIND>
    name: str  # what the module registers
    source: str  # the module's text
    use: Callable


ROWS = [
    Row("programs", "ext-program", PROGRAM, _use_program),
    Row("compilers", "ext-compiler", COMPILER, _use_compiler),
    Row("retrievers", "ext-retriever", RETRIEVER, _use_retriever),
    Row("datasets", "ext-dataset", DATASET, _use_dataset),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.kind for row in ROWS])
def test_one_module_outside_the_package_adds_one_of_each_kind(row, tmp_path, monkeypatch, settings_env):
    from tests.fakes import FIXTURE_DATA

    module = f"treeqa_ext_{row.kind}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(row.source))
    monkeypatch.syspath_prepend(str(tmp_path))
    settings_env(data_dir=tmp_path / "data" if row.kind == "datasets" else FIXTURE_DATA,
                 user_data_dir=tmp_path / "user", cache_dir=tmp_path / "cache")
    registry = _registry(row.kind)
    _discover(row.kind)
    assert row.name not in registry  # nothing named yet: not found
    monkeypatch.setenv(f"TREEQA_{row.kind.upper()}", module)
    try:
        _discover(row.kind)
        assert row.name in registry
        assert _listed(row.kind, row.name)
        row.use(tmp_path)
    finally:
        registry.unregister(row.name)
        if row.kind == "datasets":
            from treeqa.data.loaders import LAYOUTS
            from treeqa.data.sources import SOURCES

            LAYOUTS.unregister("ext-qa")
            SOURCES.unregister("ext-dataset")
        sys.modules.pop(module, None)


def test_a_plugin_that_cannot_be_imported_is_named_with_its_variable(monkeypatch):
    from treeqa.registry import discover

    monkeypatch.setenv("TREEQA_DATASETS", "treeqa_no_such_module")
    with pytest.raises(ImportError, match="TREEQA_DATASETS names 'treeqa_no_such_module'"):
        discover("datasets", "treeqa.data.datasets")
