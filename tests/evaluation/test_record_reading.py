"""Reading a run's records back (resume, replay, the tree page): a hostile or broken line is
skipped with a warning, never a crash, and never held whole when it is huge."""

import json
import logging

from treeqa.evaluation import records as records_module
from treeqa.evaluation.records import read_records
from treeqa.evaluation.runs import EvalSpec, run_evaluation


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


# benchmarks/faults.md, first round #3: records torn by a kill

def test_3_a_torn_multibyte_character_and_a_line_without_id_are_skipped(scripted, tmp_path, caplog):
    out = tmp_path / "R"
    spec = EvalSpec(program="direct", dataset="hotpotqa", split="dev", n=2)
    run_evaluation(spec, out)
    preds = out / "predictions.jsonl"
    first = preds.read_bytes().splitlines()[0]
    preds.write_bytes(first + b"\n" + b'{"answer": "no id"}\n' + b'{"id": "x", "prediction": "Z\xc3')
    result = run_evaluation(spec, out)
    assert result["summary"]["n"] == 2
    assert "predictions.jsonl, line 2: skipped" in caplog.text and "predictions.jsonl, line 3: skipped" in caplog.text
    ids = [r["id"] for r in read_records(preds)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 2


# benchmarks/faults.md, second round #12: one-line errors, not tracebacks

def test_12_records_without_numeric_scores_are_skipped(tmp_path, caplog):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b", "em": "1", "f1": 1}\n{"id": "c", "em": 1, "f1": 1.0}\n')
    assert [r["id"] for r in read_records(path)] == ["c"]
    assert "line 1: skipped" in caplog.text and "line 2: skipped" in caplog.text
