"""A new program is one file: a toy program written to a temporary module, and nothing else
changed, is listed, evaluated, served, compiled with `annotated` and drawn by `treeqa view`."""

import json
import sys

import pytest
from typer.testing import CliRunner

from tests.fakes import FakeRetriever, generic_lm, local_client, use_lm
from treeqa.programs import PROGRAMS, build_program, discover, program_name
from treeqa.programs.contract import REGISTRY, QAProgram

TOY = '''
import dspy

from treeqa.programs.common import SharedRef, check_question, safe_call
from treeqa.programs.contract import QAProgram


class ReadFound(dspy.Signature):
    """Answer the question from the passages found for it."""

    question: str = dspy.InputField()
    passages: list[str] = dspy.InputField()
    answer: str = dspy.OutputField()


class LookOnce(QAProgram):
    """One search, one read: the smallest program with a tree."""

    name = "toy"
    retrieves = True
    reader = "read"
    tree_shape = "chain"
    presets = {"wide": {"k": 4}}
    annotation_demos = {"read": "read"}

    @classmethod
    def call_bound(cls, settings):
        return 1

    def __init__(self, retriever=None, k: int = 2):
        super().__init__()
        self.k = k
        self._retriever = SharedRef(retriever)
        self.read = dspy.Predict(ReadFound)

    def forward(self, question):
        question = check_question(question, type(self).__name__)
        failures = []
        hits = self._retriever.value.search(question, self.k)
        pred = safe_call(self.read, failures, "read", question=question, passages=[p.text for p in hits])
        node = {"node": 0, "depth": 1, "parent": None, "action": "accept",
                "ids": [p.id for p in hits], "titles": [p.title for p in hits]}
        return dspy.Prediction(answer=pred.answer if pred is not None else "", failures=failures,
                               retrieved=list(hits), tree={"question": question, "nodes": [node]})
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy program's module on the path and named in TREEQA_PROGRAMS; unregistered after."""
    (tmp_path / "toy_program.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TREEQA_PROGRAMS", "toy_program")
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: FakeRetriever())
    discover()
    yield REGISTRY["toy"]
    REGISTRY.unregister("toy")
    sys.modules.pop("toy_program", None)


def test_a_program_file_elsewhere_is_registered_by_naming_its_module(toy):
    assert PROGRAMS["toy"] is toy and issubclass(toy, QAProgram)
    program = build_program("toy", FakeRetriever(), preset="wide")
    assert program.k == 4 and program_name(program) == "toy"
    from treeqa.cli import app

    listed = CliRunner().invoke(app, ["programs"])
    assert listed.exit_code == 0, listed.output
    line = next(line for line in listed.output.splitlines() if line.startswith("toy:"))
    assert "toy_program.LookOnce" in line and "One search, one read" in line
    assert "tree: chain" in listed.output and "presets: wide" in listed.output


def test_a_name_already_taken_is_refused():
    with pytest.raises(ValueError, match="program name 'tor' is taken"):
        type("Impostor", (QAProgram,), {"name": "tor", "__module__": "elsewhere"})


def test_a_module_that_cannot_be_imported_is_named(monkeypatch):
    with pytest.raises(ImportError, match="TREEQA_PROGRAMS names 'no_such_module'"):
        discover("no_such_module")


def test_the_toy_is_evaluated_compiled_served_and_drawn(toy, fixture_data, tmp_path, monkeypatch):
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.optimize import OptimizeSpec, run_optimize
    from treeqa.serving import Served, create_app, program_info, write_view

    lm = use_lm(monkeypatch, generic_lm())
    result = run_evaluation(EvalSpec(program="toy", dataset="hotpotqa", split="dev", n=2), tmp_path / "run")
    assert result["summary"]["n"] == 2 and result["summary"]["failed_calls"] == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert all(r["tree"]["nodes"][0]["ids"] for r in records)

    page = write_view(tmp_path / "run").read_text()
    drawn = json.loads(page.split("const RUN = ", 1)[1].split(";</script>", 1)[0])
    assert drawn["runs"]["run"][0]["tree"]["nodes"][0]["titles"] == records[0]["tree"]["nodes"][0]["titles"]

    compiled = run_optimize(OptimizeSpec(program="toy", dataset="hotpotqa", optimizer="annotated", train=2, dev=1),
                            tmp_path / "opt")
    assert compiled["report"]["compile"]["optimizer"] == "annotated"
    from treeqa.programs.compiled import load_program

    loaded = load_program(tmp_path / "opt" / "compiled.json", retriever=FakeRetriever())
    demos = loaded.read.demos
    assert len(demos) >= 1 and all(set(d.keys()) == {"question", "passages", "answer"} for d in demos)

    program = build_program("toy", FakeRetriever())
    with local_client(create_app(Served(program, lm, None, program_info(program, "toy", lm, "hotpotqa")),
                               time_limit=20)) as client:
        body = client.post("/v1/ask", json={"question": "Where is the lake?"}).json()
        info = client.get("/v1/program").json()
    assert body["tree"]["nodes"][0]["action"] == "accept" and info["program"] == "toy"


def test_an_undeclared_predictor_gets_no_annotated_demos(toy, fixture_data):
    from treeqa.data import load_examples
    from treeqa.teleprompt.annotated_demos import AnnotatedFewShot

    train = load_examples("hotpotqa", "train", n=2)
    bare = type("Undeclared", (toy,), {"annotation_demos": {}, "__module__": "toy_program"})
    program = AnnotatedFewShot(k=2).compile(bare(FakeRetriever()), trainset=train)
    assert program.read.demos == []
