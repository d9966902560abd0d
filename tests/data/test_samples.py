"""Samples by id: the committed lists are the questions our figures drew, an official full file
read in place of our subset gives the same questions and corpus, and --sample/--ids select
exactly the questions named."""

import json
import random

import pytest

from tests.fakes import SHARED_DATA, requires_shared_data
from treeqa.data import DataError, load_corpus, load_examples, load_split
from treeqa.data.loaders import get_dataset
from treeqa.data.sample_ids import SAMPLES_DIR, SampleError, ids_sha256, index, read_ids, sample_ids
from treeqa.data.samples import draw

SEEDED = [name for name, info in index().items() if info["drawn"] != "subset"]


@requires_shared_data
@pytest.mark.parametrize("name", list(index()))
def test_every_committed_sample_is_drawn_again_from_the_shared_data(name, settings_env):
    settings_env(data_dir=SHARED_DATA)
    assert draw(name) == sample_ids(name)


def test_the_index_and_the_lists_agree():
    assert sorted(p.stem for p in SAMPLES_DIR.glob("*.txt")) == sorted(index())
    for name in SEEDED:
        drawn = index()[name]["drawn"]
        assert len(sample_ids(name)) == drawn["n"], name
    # a seeded sample is a prefix of a larger one with the same seed and skip: the lists say so too
    assert sample_ids("hotpotqa-dev100")[:30] == sample_ids("hotpotqa-dev30")
    assert set(sample_ids("hotpotqa-dev-skip100-n197")).isdisjoint(sample_ids("hotpotqa-dev100"))


def _full_data_dir(tmp_path, extra: int = 40):
    """A data folder like ../shared/data whose HotpotQA dev is a hand-made "official full file":
    our subset's records in another order, among records of its own."""
    root = tmp_path / "full"
    for child in SHARED_DATA.iterdir():
        if child.name != "hotpotqa":
            (root / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / child.name).symlink_to(child)
    (root / "hotpotqa").mkdir()
    for name in ("hotpot_train_subset.json", "hotpot_train_evidence_500.jsonl"):
        (root / "hotpotqa" / name).symlink_to(SHARED_DATA / "hotpotqa" / name)
    ours = json.loads((SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_subset.json").read_text())
    others = [{"_id": f"5a0000000000000000{i:04d}", "question": f"Which town made record {i}?",
               "answer": f"Town {i}", "type": "bridge", "level": "hard",
               "supporting_facts": [[f"Town {i}", 0]],
               "context": [[f"Town {i}", [f"Town {i} made record {i}."]], [f"Field {i}", ["A field."]]]}
              for i in range(extra)]
    records = list(reversed(ours)) + others
    random.Random(7).shuffle(records)
    (root / get_dataset("hotpotqa").splits["dev"].official).write_text(json.dumps(records))
    return root, len(ours)


@requires_shared_data
def test_an_official_full_file_gives_our_questions_samples_and_corpus(settings_env, tmp_path):
    settings_env(data_dir=SHARED_DATA)
    split = load_split("hotpotqa", "dev")
    seeded = load_examples("hotpotqa", "dev", n=197, skip=100)
    corpus = load_corpus("hotpotqa")
    root, ours = _full_data_dir(tmp_path)
    settings_env(data_dir=root)
    assert [ex.toDict() for ex in load_split("hotpotqa", "dev")] == [ex.toDict() for ex in split]
    assert [ex.id for ex in load_examples("hotpotqa", "dev", n=197, skip=100)] == [ex.id for ex in seeded]
    assert [ex.id for ex in seeded] == sample_ids("hotpotqa-dev-skip100-n197")
    assert load_corpus("hotpotqa") == corpus  # same passages, same order: the same index
    # asked for, the whole full file
    settings_env(data_dir=root, full_splits=1)
    assert len(load_split("hotpotqa", "dev")) == ours + 40
    assert len(load_corpus("hotpotqa")) > len(corpus)


@requires_shared_data
def test_a_full_file_without_one_of_our_records_is_refused_naming_it(settings_env, tmp_path):
    root, _ = _full_data_dir(tmp_path)
    full = root / get_dataset("hotpotqa").splits["dev"].official
    records = json.loads(full.read_text())
    dropped = sample_ids("hotpotqa-dev-subset")[5]
    full.write_text(json.dumps([r for r in records if r["_id"] != dropped]))
    settings_env(data_dir=root)
    with pytest.raises(DataError, match=f"lacks 1 of the 297 records.*{dropped}.*official file"):
        load_split("hotpotqa", "dev")
    with pytest.raises(DataError, match=dropped):
        load_corpus("hotpotqa")


def test_an_id_list_is_read_in_order_and_a_repeat_is_refused(tmp_path):
    path = tmp_path / "ids.txt"
    path.write_text("# mine\nb\n\na\n")
    assert read_ids(path) == ["b", "a"]
    assert ids_sha256(["b", "a"]) != ids_sha256(["a", "b"])
    path.write_text("a\nb\na\n")
    with pytest.raises(SampleError, match="'a' twice"):
        read_ids(path)


def test_an_id_list_with_a_byte_order_mark_or_too_large_is_read_or_refused(tmp_path, monkeypatch):
    path = tmp_path / "ids.txt"
    path.write_bytes("\ufeffhp-dev-1\nhp-dev-2\n".encode())  # as Windows editors save UTF-8
    assert read_ids(path) == ["hp-dev-1", "hp-dev-2"]
    monkeypatch.setattr("treeqa.data.sample_ids.MAX_IDS_BYTES", 16)
    path.write_text("a\n" * 20)
    with pytest.raises(SampleError, match="not a list of question ids"):
        read_ids(path)


def test_questions_by_id_refuse_a_skip_or_a_seed_that_would_be_ignored():
    from treeqa.evaluation.runs import EvalSpec

    assert EvalSpec(program="direct", ids=["a", "b"], n=2).ids == ["a", "b"]
    for extra in ({"skip": 1}, {"seed": 5}):
        with pytest.raises(ValueError, match="--skip and --seed do not apply"):
            EvalSpec(program="direct", ids=["a", "b"], n=2, **extra)
