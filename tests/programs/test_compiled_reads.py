"""A compiled file is read once per command, into a `CompiledFile` that the command passes along
(issue 64 #1): `evaluate --compiled`, `replay` and a resumed `optimize --replay-from` each parse
their `compiled.json` once (they parsed it 2, 2 and 5 times)."""

import json
from pathlib import Path

import pytest

from tests.fakes import answering, review, review_kind, run_cli, scripted_lm, tree_retriever, use_lm
from treeqa.programs.compiled import file as compiled_file
from treeqa.programs.compiled import save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews


def accept_all(call):
    return review("accept", analysis="enough")


@pytest.fixture
def reads(monkeypatch):
    """The compiled files parsed, one entry a parse."""
    parsed = []
    inner = compiled_file.read_state
    monkeypatch.setattr(compiled_file, "read_state", lambda path: parsed.append(Path(path).resolve()) or inner(path))
    return parsed


@pytest.fixture
def searcher(fixture_data, monkeypatch):
    """ToR's scripted search: every index is the tree retriever, every review accepts."""
    found = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: found)
    lm, _ = scripted_lm(answering(accept_all, answer="Paris"), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    return found


def _tor(tmp_path, name, **settings) -> Path:
    program = TreeOfReviews(retriever=tree_retriever(), **settings)
    return save_compiled(program, tmp_path / f"{name}.json", name="tor", dataset="hotpotqa", retriever="dense")


def test_evaluate_and_replay_parse_their_compiled_file_once(searcher, reads, tmp_path):
    source = _tor(tmp_path, "source", widths=(3, 2))
    result = run_cli("evaluate", "--compiled", str(source), "--n", "2", "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert reads.count(source.resolve()) == 1

    searcher.passages = [p for made in searcher._made.values() for p in made]
    reading = _tor(tmp_path, "reading", widths=(3, 2), read_top=2)
    reads.clear()
    result = run_cli("replay", str(tmp_path / "run"), "--compiled", str(reading), "--out", str(tmp_path / "replay"))
    assert result.exit_code == 0, result.output
    assert reads.count(reading.resolve()) == 1


def test_a_resumed_optimize_replay_from_parses_its_compiled_file_once(searcher, reads, tmp_path):
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.optimize import OptimizeSpec, run_optimize

    params = {"widths": [3, 2]}
    source = tmp_path / "zero-shot"
    run_evaluation(EvalSpec(program="tor", n=2, params=params), source)
    searcher.passages = [p for made in searcher._made.values() for p in made]
    spec = OptimizeSpec(program="tor", optimizer="reader", train=2, dev=2, params=params, candidates=1,
                        replay_from=str(source), zero_shot=False)
    compiled = (tmp_path / "O" / "compiled.json").resolve()
    run_optimize(spec, tmp_path / "O", echo=lambda *a: None)
    assert reads.count(compiled) == 1  # written by the compile, read for the replay
    reads.clear()
    result = run_optimize(spec, tmp_path / "O", echo=lambda *a: None)
    assert reads.count(compiled) == 1
    assert result["report"]["compiled"]["n"] == 2
    assert json.loads(compiled.read_text())["treeqa"]["program"] == "tor"
