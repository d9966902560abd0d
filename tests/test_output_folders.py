"""Where a run writes: `--out` must be a run of the same spec, a new folder or an empty one, and
`treeqa view --out` overwrites only a page it wrote itself; anything else is refused in one line."""

import pytest

from treeqa.evaluation.runs import EvalSpec, claim_folder
from treeqa.serving import view


def test_a_folder_holding_something_else_is_not_claimed(tmp_path):
    spec = EvalSpec(program="direct", n=1)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="is not empty and holds no run \\(precious.txt\\)"):
        claim_folder(tmp_path / "home", spec)
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["precious.txt"]  # nothing written
    (tmp_path / "empty").mkdir()
    claim_folder(tmp_path / "empty", spec)  # an empty folder, or a new one, becomes the run's
    claim_folder(tmp_path / "new", spec)
    claim_folder(tmp_path / "new", spec)  # and the same spec resumes there
    assert (tmp_path / "new" / "spec.json").is_file()


def test_view_overwrites_only_its_own_page(tmp_path, monkeypatch):
    monkeypatch.setattr(view, "load_run", lambda run_dir: {"title": "a run", "questions": []})
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    with pytest.raises(ValueError, match="is not a page `treeqa view` wrote"):
        view.write_view(tmp_path, precious)
    assert precious.read_text() == "keep me"
    with pytest.raises(ValueError, match="is a folder"):
        view.write_view(tmp_path, tmp_path)
    page = view.write_view(tmp_path, tmp_path / "page.html")
    assert page.read_text().startswith("<!doctype html>")
    view.write_view(tmp_path, page)  # its own page: written again


def test_evaluate_writes_nothing_into_a_foreign_folder(tmp_path):
    from treeqa.evaluation.runs import run_evaluation

    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds no run"):
        run_evaluation(EvalSpec(program="direct", n=1), tmp_path / "home")
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["precious.txt"]  # not even a lock
