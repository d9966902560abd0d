"""Reading a run's records back (resume, replay, the tree page): a hostile or broken line is
skipped with a warning, never a crash, and never held whole when it is huge."""

import json
import logging

from treeqa.evaluation import records as records_module
from treeqa.evaluation.records import read_records


def _good(i: int) -> str:
    return json.dumps({"id": f"q{i}", "em": 1.0, "f1": 1.0, "answer": "x"})


def test_a_deeply_nested_line_is_skipped_not_a_crash(tmp_path, caplog):
    path = tmp_path / "predictions.jsonl"
    deep = '{"id": "q9", "em": 0, "f1": 0, "tree": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path.write_text("\n".join([_good(1), '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}", deep, _good(2)]) + "\n")
    with caplog.at_level(logging.WARNING):
        records = read_records(path)
    assert [r["id"] for r in records] == ["q1", "q2"]
    assert "line 3: skipped, nested too deeply" in caplog.text


def test_a_line_over_the_size_bound_is_skipped_and_the_next_read(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(records_module, "MAX_RECORD_BYTES", 1000)
    path = tmp_path / "predictions.jsonl"
    huge = json.dumps({"id": "big", "em": 1.0, "f1": 1.0, "answer": "y" * 5000})
    path.write_text("\n".join([_good(1), huge, _good(2)]) + "\n")
    with caplog.at_level(logging.WARNING):
        records = read_records(path)
    assert [r["id"] for r in records] == ["q1", "q2"]
    assert "line 2: skipped, over 1000 bytes" in caplog.text
