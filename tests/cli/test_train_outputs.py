"""No `train` command writes over what it did not write: a user's folder or file is refused by
name before any work, and the command's own folder is taken back (a rebuild, a resume)."""

import json

import pytest

from tests.fakes import run_cli
from treeqa.train import outputs


@pytest.mark.parametrize(("args", "name"), [
    (["train", "reads", "--out"], "treeqa train reads"),
    (["train", "lora", "--set", "nowhere", "--out"], "treeqa train lora"),
    (["train", "reader", "--out"], "treeqa train reader"),
])
def test_a_folder_of_the_users_is_refused_and_left_as_it_was(tmp_path, args, name):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    result = run_cli(*args, str(folder))
    assert result.exit_code == 1 and "does not write (notes.txt)" in result.output and name in result.output
    assert [p.name for p in folder.iterdir()] == ["notes.txt"] and (folder / "notes.txt").read_text() == "my notes"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is a file, not a folder" in run_cli(*args, str(a_file)).output


def test_a_reads_or_training_named_file_not_written_by_the_command_is_refused(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "reads.jsonl").write_text("my own reads\n")
    result = run_cli("train", "reads", "--out", str(folder))
    assert result.exit_code == 1 and "did not write" in result.output
    assert (folder / "reads.jsonl").read_text() == "my own reads\n"
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "train-data.jsonl").write_text("mine\n")
    assert "did not write" in run_cli("train", "lora", "--set", "x", "--out", str(lora)).output
    assert (lora / "train-data.jsonl").read_text() == "mine\n"


def test_the_commands_own_folders_are_taken_back():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "set"
        built.mkdir()
        (built / "reads.jsonl").write_text("{}\n")
        (built / "manifest.json").write_text(json.dumps({"reads_sha256": "x", "settings": {}, "counts": {}}))
        outputs.claim_folder(built, outputs.READS_FILES, outputs.reads_folder_is_ours, "treeqa train reads")
        trained = Path(tmp) / "lora"
        (trained / "layer-cache").mkdir(parents=True)
        for name in ("train-data.jsonl", "best-12.pt", "checkpoint.pt"):
            (trained / name).write_text("x")
        outputs.claim_folder(trained, outputs.LORA_FILES, outputs.lora_folder_is_ours, "treeqa train lora")
        reader = Path(tmp) / "reader"
        reader.mkdir()
        (reader / "reader.json").write_text(json.dumps({"recipe": {}, "reads": {}}))
        outputs.claim_folder(reader, outputs.READER_FILES, outputs.reader_folder_is_ours, "treeqa train reader")


def test_attach_and_score_refuse_an_existing_file_of_another_kind(tmp_path):
    adapter = tmp_path / "a.gguf"
    adapter.write_bytes(b"weights")
    settings = tmp_path / "settings.json"
    settings.write_text('{"theme": "dark"}')
    result = run_cli("train", "attach", "rta", str(adapter), str(settings))
    assert result.exit_code == 1 and "is not a compiled program" in result.output
    assert settings.read_text() == '{"theme": "dark"}'
    scores = tmp_path / "scores.jsonl"
    scores.write_text("my data\nmore\n")
    result = run_cli("train", "score", "rta", "--set", str(tmp_path), "--out", str(scores))
    assert result.exit_code == 1 and "is not a scores file" in result.output and scores.read_text() == "my data\nmore\n"
    assert outputs.is_scores_file(tmp_path / "none") is False
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_text('{"id": "q:gold", "em": 1.0}\n{"id": "q2:go')  # a killed run's torn last line
    assert outputs.is_scores_file(resumed)


# faults.md, fifth round: a missing or torn reader set ended in a traceback (its message inside was good)
def test_5_a_missing_or_torn_reader_set_is_one_line_for_every_command_that_reads_one(tmp_path):
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "reads.jsonl").write_text('{"broken\n')
    (torn / "manifest.json").write_text("{}")
    for args, said in ((["lora", "--set", str(tmp_path / "none"), "--out", str(tmp_path / "o")], "no reader set here"),
                       (["reasons", "--set", str(torn)], "not a read"),
                       (["score", "rta", "--set", str(torn), "--out", str(tmp_path / "s.jsonl")], "not a read")):
        done = run_cli("train", *args)
        assert done.exit_code == 1 and said in done.output and "Traceback" not in done.output, done.output
        assert len(done.output.strip().splitlines()) == 1
