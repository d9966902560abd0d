"""`treeqa view`'s page holds whatever a record says as data, never as markup, and a run whose
records could not all be read gives a page that says so and exit status 1."""

import json
import re

from typer.testing import CliRunner

from treeqa.cli import app
from treeqa.serving.view import write_view

HOSTILE = "<!--<script>alert(1)</script></script><b>&amp;"


def _run(folder, lines):
    folder.mkdir()
    (folder / "predictions.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def _record(i, **extra):
    return json.dumps({"id": f"q{i}", "question": f"question {i}", "answers": ["a"], "prediction": "a",
                       "em": 1.0, "f1": 1.0, **extra})


def test_9_markup_in_a_record_cannot_blank_the_view_page(tmp_path):
    run = _run(tmp_path / "run", [_record(1, question=HOSTILE, prediction=HOSTILE)])
    page = write_view(run).read_text()
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    data = next(s for s in scripts if s.startswith("const RUN = "))
    assert "<" not in data and ">" not in data  # nothing in the data can open or close an element
    assert json.loads(data.removeprefix("const RUN = ").rstrip(";"))["runs"]["run"][0]["question"] == HOSTILE
    assert page.count("<script>") == page.count("</script>") == 3  # tree.js, the data, view.js


def test_9_view_exits_1_naming_partial_records(tmp_path):
    run = _run(tmp_path / "run", [_record(1), '{"id": "q2", "em": 1.0, "f1"', _record(3)])
    result = CliRunner().invoke(app, ["view", str(run)])
    assert result.exit_code == 1
    assert "shows part of the run" in result.output and "predictions.jsonl, line 2" in result.output
    assert (run / "view.html").is_file()  # the page of what could be read is still written
    assert CliRunner().invoke(app, ["view", str(_run(tmp_path / "whole", [_record(1)]))]).exit_code == 0
