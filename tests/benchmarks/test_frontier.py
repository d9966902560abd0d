"""benchmarks/frontier.py draws EM against seconds a question from the committed YAMLs: a point a
run that searched and read itself (no replay, no gold paragraphs), compiled ones told apart."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _frontier():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("frontier", ROOT / "benchmarks" / "frontier.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["frontier"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_a_point_is_a_run_that_searched_itself():
    frontier = _frontier()
    doc = {"runs": [
        {"run": "rta", "command": "treeqa evaluate", "spec": {"program": "rta"},
         "figures": {"em": 31.0, "seconds_per_q": 7.0}},
        {"run": "tor-path-judge-replay", "command": "treeqa replay", "spec": {"program": "tor"},
         "figures": {"em": 33.0, "seconds_per_q": 3.0}},
        {"run": "rta-gold", "command": "treeqa evaluate", "spec": {"program": "rta", "retriever": "gold"},
         "figures": {"em": 40.0, "seconds_per_q": 5.0}},
        {"run": "tor-default", "kind": "optimize", "command": "treeqa optimize", "spec": {"program": "tor"},
         "compiled": {"em": 45.0, "seconds_per_q": 30.0}}]}
    assert frontier.points(doc) == [frontier.Point("rta", 31.0, 7.0, False),
                                    frontier.Point("tor-default", 45.0, 30.0, True)]


def test_the_plot_is_drawn_from_the_committed_yamls(tmp_path):
    pytest.importorskip("matplotlib")
    out = _frontier().draw(tmp_path / "frontier.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
