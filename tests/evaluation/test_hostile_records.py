"""Hostile structure in a run's records is refused where it is read: a recorded tree with a
cycle (a node its own parent) by `rebuild_run`, `treeqa replay` and `optimize --replay-from`
before any LM call; numbers that are not finite (NaN, Infinity, 1e400) by `read_records`."""

import json
from collections.abc import Mapping

import pytest
from typer.testing import CliRunner

from tests.fakes import answering, review, review_kind, run, scripted_lm, tree_retriever, use_lm
from treeqa.cli import app
from treeqa.evaluation.records import read_records
from treeqa.evaluation.replay import ReplayError, rebuild_run
from treeqa.programs.compiled import save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews


def accept_all(call):
    return review("accept", analysis="enough")


def accept_even(call):
    return review("accept", analysis="enough") if int(call.titles[-1][1:]) % 2 == 0 else review("reject")


class Bounded(Mapping):
    """Passages that give up after `limit` look-ups: a loop that never ends fails the test, not the machine."""

    def __init__(self, passages: dict, limit: int = 10_000):
        self.passages, self.limit, self.looked = passages, limit, 0

    def __getitem__(self, key):
        self.looked += 1
        if self.looked > self.limit:
            raise RuntimeError("looked up without end: the tree was walked in a cycle")
        return self.passages[key]

    def __contains__(self, key):
        return key in self.passages and self[key] is not None

    def __iter__(self):
        return iter(self.passages)

    def __len__(self):
        return len(self.passages)


def test_6_rebuild_run_refuses_a_node_that_is_its_own_parent():
    retriever = tree_retriever()
    live, _ = run(TreeOfReviews(retriever=retriever, widths=(3, 2)), answering(accept_all))
    tree = json.loads(json.dumps(live.tree))
    accepted = next(n for n in tree["nodes"] if n.get("action") == "accept")
    accepted["parent"] = accepted["node"]
    passages = {p.id: p for made in retriever._made.values() for p in made}
    with pytest.raises(ReplayError, match=f"node {accepted['node']} has parent .*not an earlier node"):
        rebuild_run(tree, Bounded(passages))
    two = json.loads(json.dumps(live.tree))  # a longer cycle: 1 -> 2 -> 1
    two["nodes"][1]["parent"], two["nodes"][2]["parent"] = 2, 1
    with pytest.raises(ReplayError, match="a cycle, or not a tree"):
        rebuild_run(two, Bounded(passages))


def test_6_replay_and_optimize_replay_from_refuse_a_cyclic_record_before_any_lm_call(fixture_data, tmp_path,
                                                                                     monkeypatch):
    from treeqa.evaluation.runs import EvalSpec, run_evaluation
    from treeqa.optimize import OptimizeSpec, run_optimize

    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda *a, **k: searcher)
    lm, engine = scripted_lm(answering(accept_even, answer="Paris"), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    params = {"widths": [3, 2]}
    run_evaluation(EvalSpec(program="tor", n=2, params=params), tmp_path / "tor")
    searcher.passages = [p for made in searcher._made.values() for p in made]
    records_path = tmp_path / "tor" / "predictions.jsonl"
    records = [json.loads(line) for line in records_path.read_text().splitlines()]
    nodes = records[0]["tree"]["nodes"]
    parents = {n.get("parent") for n in nodes}
    # a leaf that is not accepted: without the check, nothing walks up from it (no endless walk)
    quiet = next(n for n in nodes[1:] if n.get("action") != "accept" and n["node"] not in parents)
    quiet["parent"] = quiet["node"]
    records_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    compiled = save_compiled(TreeOfReviews(retriever=searcher, widths=(3, 2)), tmp_path / "c.json", name="tor",
                             dataset="hotpotqa", retriever="dense")

    before = len(engine.calls)
    result = CliRunner().invoke(app, ["replay", str(tmp_path / "tor"), "--compiled", str(compiled),
                                      "--out", str(tmp_path / "replay")])
    assert result.exit_code == 1 and "not an earlier node" in result.output
    with pytest.raises(ReplayError, match=f"record '{records[0]['id']}'.*not an earlier node"):
        run_optimize(OptimizeSpec(program="tor", optimizer="reader", train=2, dev=2, params=params,
                                  replay_from=str(tmp_path / "tor")), tmp_path / "O")
    assert len(engine.calls) == before


def test_6_records_with_numbers_that_are_not_finite_are_refused(tmp_path):
    path = tmp_path / "predictions.jsonl"
    good = {"id": "a", "em": 1.0, "f1": 1.0, "seconds": 2.5}
    path.write_text("\n".join([json.dumps(good),
                               '{"id": "b", "em": 0.0, "f1": 0.0, "seconds": NaN}',
                               '{"id": "c", "em": 0.0, "f1": 0.0, "seconds": Infinity}',
                               '{"id": "d", "em": 0.0, "f1": 0.0, "tree": {"nodes": [{"p_relevant": 1e400}]}}',
                               '{"id": "e", "em": 0.0, "f1": 0.0, "seconds": -Infinity}']) + "\n")
    skipped = []
    assert read_records(path, skipped) == [good]
    assert [line.split(", ")[-1].split(":")[0] for line in skipped] == ["line 2", "line 3", "line 4", "line 5"]
