"""`train_reader`: the reads built (or kept where the same set is there), the adapter trained on
one read a question with the recipe's validation reads, and reader.json saying what went in."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from treeqa.train.reader import ReaderRecipe, learned_part, recipe_differences, train_reader
from treeqa.train.reads import write_rows


def chat(answer: str) -> dict:
    return {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": answer}]}


def fake_build(calls: list):
    def build(out: Path, **settings):
        calls.append(settings)
        rows = [{"id": f"q{i}:{kind}", "question_id": f"q{i}", "side": "validation" if i == 0 else "train",
                 "kind": kind, "answer": "Paris", "chat": chat("Paris"), "pick": p}
                for i in range(4) for p, kind in enumerate(("gold", "partial"))]
        return write_rows(rows, out, settings, {"train_reads": 6})
    return build


def fake_train(seen: dict):
    def train(chats, out_dir, recipe, **options):
        seen.update(chats=chats, recipe=recipe, **options)
        out_dir.mkdir(parents=True, exist_ok=True)
        adapter = out_dir / "adapter.gguf"
        adapter.write_bytes(b"weights")
        (out_dir / "training.json").write_text(json.dumps({"base_sha256": "b" * 64}))
        report = SimpleNamespace(to_dict=lambda: {"examples": len(chats), "best": {"step": 3, "val_loss": 0.3},
                                                  "seconds": 12.0, "curve": []})
        return adapter, report
    return train


def test_the_whole_road_writes_a_record_of_what_went_in(tmp_path, monkeypatch):
    monkeypatch.setattr("treeqa.train.reader.native_bf16", lambda: False)
    built, seen = [], {}
    record = train_reader(tmp_path / "r", build=fake_build(built), train=fake_train(seen), say=lambda line: None)
    assert built == [ReaderRecipe().reads_settings()] and built[0]["yes_no_by_template"]
    assert len(seen["chats"]) == 3 and seen["validation"] == [chat("Paris")]  # one read a question; q0 held out
    assert seen["recipe"].top_layers == 8 and seen["recipe"].learning_rate == 5e-4  # the one recipe's defaults
    saved = json.loads((tmp_path / "r" / "reader.json").read_text())
    assert saved == record and record["base_sha256"] == "b" * 64 and record["adapter"]["file"] == "lora/adapter.gguf"
    assert record["reads"]["train_reads"] == 3 and record["training"]["best"]["val_loss"] == 0.3
    again = train_reader(tmp_path / "r", build=fake_build(built), train=fake_train({}), say=lambda line: None)
    assert len(built) == 1 and again["reads"]["sha256"] == record["reads"]["sha256"]  # the set kept, not rebuilt
    (tmp_path / "r" / "reads" / "reads.jsonl").write_text("edited\n")
    with pytest.raises(RuntimeError, match="rebuilt"):  # an edited set is built again, never trained on
        train_reader(tmp_path / "r", build=lambda out, **s: (_ for _ in ()).throw(RuntimeError("rebuilt")),
                     train=fake_train({}), say=lambda line: None)


def test_bfloat16_where_the_cpu_has_it_and_a_recipe_matches_across_dtypes(monkeypatch):
    monkeypatch.setattr("treeqa.train.reader.native_bf16", lambda: True)
    fast = ReaderRecipe().for_this_cpu()
    assert (fast.lora.lower_dtype, fast.lora.top_dtype) == ("bfloat16", "bfloat16")
    assert recipe_differences(fast.to_dict(), ReaderRecipe()) == []
    assert learned_part(fast.to_dict()) == learned_part(ReaderRecipe().to_dict())
    assert ReaderRecipe.from_dict(fast.to_dict()) == fast
    other = ReaderRecipe(per_question=2)
    assert recipe_differences(other.to_dict(), ReaderRecipe()) == ["per_question: 2 != 1"]


def test_a_trained_reader_is_released_with_its_record_and_read_back(tmp_path, monkeypatch):
    from treeqa.train.released import ReleasedReaderError, release, released_reader

    monkeypatch.setattr("treeqa.train.reader.native_bf16", lambda: False)
    train_reader(tmp_path / "r", build=fake_build([]), train=fake_train({}), say=lambda line: None)
    folder = release(tmp_path / "r", tmp_path / "released", trained_from="c6705fb")
    found = released_reader(folder)
    assert found.adapter.read_bytes() == b"weights" and found.record["trained_from"] == "c6705fb"
    assert found.record["command"].startswith("treeqa train reader")
    assert found.record["adapter"]["file"] == "adapter.gguf"
    (tmp_path / "r" / "lora" / "adapter.gguf").write_bytes(b"changed")
    with pytest.raises(ReleasedReaderError, match="sha256"):
        release(tmp_path / "r", tmp_path / "again")
