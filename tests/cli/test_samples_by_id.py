"""--sample NAME and --ids FILE on evaluate, compare and optimize (--train-sample / --train-ids):
exactly the questions named, in that order, and a run folder holds one list of ids."""

import json

from tests.fakes import SHARED_DATA, requires_shared_data, run_cli
from treeqa.data import load_examples
from treeqa.data.sample_ids import ids_sha256, sample_ids
from treeqa.programs.compiled import read_recipe


def _records(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_evaluate_by_ids_asks_exactly_those_in_order_and_a_resume_needs_the_same(scripted, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("hp-dev-2\nhp-dev-1\n")
    out = tmp_path / "R"
    result = run_cli("evaluate", "--program", "direct", "--ids", str(ids), "--out", str(out), "--no-cache")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in _records(out)] == ["hp-dev-2", "hp-dev-1"]
    spec = json.loads((out / "spec.json").read_text())
    assert spec["ids"] == ["hp-dev-2", "hp-dev-1"] and spec["ids_sha256"] == ids_sha256(spec["ids"])
    assert "by id" in json.loads((out / "summary.json").read_text())["data"]["questions"]
    ids.write_text("hp-dev-1\nhp-dev-2\n")  # the same questions in another order: another sample
    again = run_cli("evaluate", "--program", "direct", "--ids", str(ids), "--out", str(out), "--no-cache")
    assert again.exit_code == 1 and "holds a run of another spec" in again.output
    ids.write_text("hp-dev-1\nhp-dev-9\n")
    missing = run_cli("evaluate", "--program", "direct", "--ids", str(ids), "--out", str(tmp_path / "M"))
    assert missing.exit_code == 1 and "hotpotqa dev has no question with id 'hp-dev-9'" in missing.output
    bad_n = run_cli("evaluate", "--program", "direct", "--ids", str(ids), "--n", "5", "--out", str(tmp_path / "N"))
    assert bad_n.exit_code == 1 and "n=5 but 2 ids are given" in bad_n.output


def test_compare_by_ids_runs_every_program_on_those_questions(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr("treeqa.evaluation.runs.RUNS_DIR", tmp_path / "runs")
    ids = tmp_path / "ids.txt"
    ids.write_text("hp-dev-2\n")
    result = run_cli("compare", "--programs", "direct,cot", "--ids", str(ids), "--no-cache")
    assert result.exit_code == 0, result.output
    runs = sorted((tmp_path / "runs").rglob("predictions.jsonl"))
    assert len(runs) == 2 and all([r["id"] for r in _records(p.parent)] == ["hp-dev-2"] for p in runs)
    assert {p.parent.parent.name for p in runs} == {f"hotpotqa-dev-ids-{ids_sha256(['hp-dev-2'])[:8]}"}


def test_a_sample_names_its_dataset_and_split_and_an_unknown_one_is_listed(fixture_data, tmp_path):
    other = run_cli("evaluate", "--program", "direct", "--sample", "hotpotqa-dev30", "--dataset", "musique",
                    "--out", str(tmp_path / "R"))
    assert other.exit_code == 1 and "hotpotqa-dev30 is hotpotqa dev, not dataset musique" in other.output
    unknown = run_cli("evaluate", "--program", "direct", "--sample", "hotpotqa-dev31", "--out", str(tmp_path / "R"))
    assert unknown.exit_code == 1 and "no sample 'hotpotqa-dev31'" in unknown.output
    assert "hotpotqa-dev30" in unknown.output and "-subset" not in unknown.output
    # a sample of the fixture data's dataset whose questions the fixture files lack
    absent = run_cli("evaluate", "--program", "direct", "--sample", "hotpotqa-dev30", "--out", str(tmp_path / "R"))
    assert absent.exit_code == 1 and f"no question with id {sample_ids('hotpotqa-dev30')[0]!r}" in absent.output


@requires_shared_data
def test_a_committed_sample_asks_the_questions_its_seeded_draw_asked(scripted, settings_env, tmp_path):
    settings_env(data_dir=SHARED_DATA, cache_dir=tmp_path / "cache")
    out = tmp_path / "R"
    result = run_cli("evaluate", "--program", "direct", "--sample", "hotpotqa-dev30", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in _records(out)] == [ex.id for ex in load_examples("hotpotqa", "dev", n=30)]
    assert json.loads((out / "spec.json").read_text())["sample"] == "hotpotqa-dev30"


def test_optimize_takes_each_side_by_ids(scripted, tmp_path):
    dev, train = tmp_path / "dev.txt", tmp_path / "train.txt"
    dev.write_text("hp-dev-2\nhp-dev-1\n")
    train.write_text("hp-train-2\n")
    out = tmp_path / "O"
    args = ["optimize", "--program", "direct", "--optimizer", "bootstrap", "--ids", str(dev), "--train-ids",
            str(train), "--out", str(out), "--no-cache"]
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    assert "on 1 hotpotqa train questions" in result.output
    assert [r["id"] for r in _records(out / "compiled")] == ["hp-dev-2", "hp-dev-1"]
    spec = json.loads((out / "spec.json").read_text())
    assert spec["train_ids"] == ["hp-train-2"] and spec["ids"] == ["hp-dev-2", "hp-dev-1"]
    assert read_recipe(out / "compiled.json")[0]["compile"]["train_ids_sha256"] == ids_sha256(["hp-train-2"])
    train.write_text("hp-train-1\n")  # other train questions: not this folder's compile
    again = run_cli(*args)
    assert again.exit_code == 1 and "another spec" in again.output and "other questions by id" in again.output
    wrong = run_cli("optimize", "--program", "direct", "--train-sample", "hotpotqa-dev30", "--out", str(tmp_path / "W"))
    assert wrong.exit_code == 1 and "the train side asks train questions" in wrong.output


def test_a_replay_of_a_run_by_ids_replays_those_questions(fixture_data, tmp_path, monkeypatch):
    from tests.fakes import answering, review, review_kind, scripted_lm, tree_retriever, use_lm
    from treeqa.programs.compiled import save_compiled
    from treeqa.programs.tree_of_reviews import TreeOfReviews

    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda dataset, kind, corpus=None: searcher)
    lm, _ = scripted_lm(answering(lambda call: review("accept", analysis="enough")), classify=review_kind,
                        whole_call=True)
    use_lm(monkeypatch, lm)
    compiled = save_compiled(TreeOfReviews(retriever=tree_retriever(), widths=(2, 1)), tmp_path / "tor.json",
                             name="tor", dataset="hotpotqa", retriever="dense")
    ids = tmp_path / "ids.txt"
    ids.write_text("hp-dev-2\n")  # the seeded first question is hp-dev-1: a replay by n would miss this one
    run = tmp_path / "run"
    assert run_cli("evaluate", "--compiled", str(compiled), "--ids", str(ids), "--out", str(run)).exit_code == 0
    searcher.passages = [p for made in searcher._made.values() for p in made]
    result = run_cli("replay", str(run), "--compiled", str(compiled), "--out", str(tmp_path / "replay"))
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in _records(tmp_path / "replay")] == ["hp-dev-2"]
    assert json.loads((tmp_path / "replay" / "spec.json").read_text())["ids"] == ["hp-dev-2"]
