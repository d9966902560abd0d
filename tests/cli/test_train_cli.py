"""`treeqa train reasons` and `train lora --with-reasons` on a small built set."""

import json

from tests.fakes.cli import run_cli
from tests.fakes.lm import scripted_lm, use_lm


def write_set(folder):
    folder.mkdir()
    reads = [{"id": f"q{i}:gold", "question_id": f"q{i}", "side": side, "kind": "gold", "question": f"Q{i}?",
              "passages": [f"P{i}: Paris."], "answer": "Paris", "chat": {"messages": [{"role": "user", "content": "x"},
                                                                                        {"role": "assistant",
                                                                                         "content": "y"}]}}
             for i, side in enumerate(["train", "train", "validation"])]
    (folder / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))


def test_reasons_are_written_beside_the_set_and_counted(tmp_path, monkeypatch):
    write_set(tmp_path / "set")
    lm, engine = scripted_lm(lambda kind, inputs: {"reasoning": "P says Paris.", "answer": "Paris"})
    use_lm(monkeypatch, lm)
    result = run_cli("train", "reasons", "--set", str(tmp_path / "set"))
    assert result.exit_code == 0, result.output
    summary = result.output[result.output.rindex("{"):]  # after the progress bar
    assert json.loads(summary) == {"found": 2, "kept": 2, "reads": 2}
    assert len((tmp_path / "set" / "reasons.jsonl").read_text().splitlines()) == 2


def test_training_with_reasons_before_any_were_found_is_refused(tmp_path):
    write_set(tmp_path / "set")
    result = run_cli("train", "lora", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "out"),
                     "--with-reasons")
    assert result.exit_code != 0 and "train reasons" in result.output
    assert not (tmp_path / "out").exists()


def test_auto_dtypes_resolve_by_the_cpu_and_a_bad_dtype_is_one_line(tmp_path, monkeypatch):
    seen = []

    def train_adapter(chats, out, recipe, **kwargs):
        seen.append(recipe)
        raise SystemExit(0)  # stop before any model is loaded

    write_set(tmp_path / "set")
    monkeypatch.setattr("treeqa.lm.provider.train_adapter", train_adapter)
    for native, want in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr("treeqa.lm.lora.native_bf16", lambda native=native: native)
        run_cli("train", "lora", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "out"), "--top-dtype", "auto")
        assert (seen[-1].lower_dtype, seen[-1].top_dtype) == (want, want)
    bad = run_cli("train", "lora", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "out"),
                  "--top-dtype", "float16")
    assert bad.exit_code != 0 and "top_dtype" in bad.output and len(seen) == 2
    run_cli("train", "lora", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "out"), "--max-tokens", "3072")
    assert seen[-1].max_tokens == 3072
    zero = run_cli("train", "lora", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "out"), "--max-tokens", "0")
    assert zero.exit_code != 0 and "max_tokens" in zero.output and len(seen) == 3


def test_several_sets_train_together_and_their_validation_reads_alternate(tmp_path, monkeypatch):
    seen = {}

    def train_adapter(chats, out, recipe, validation=(), **kwargs):
        seen.update(train=[c["messages"][0]["content"] for c in chats],
                    validation=[c["messages"][0]["content"] for c in validation])
        raise SystemExit(0)  # stop before any model is loaded

    for name, sides in (("a", ["train", "validation", "validation"]), ("b", ["train", "train", "validation"])):
        (tmp_path / name).mkdir()
        reads = [{"id": f"{name}{i}", "question_id": f"{name}{i}", "side": side, "kind": "gold",
                  "chat": {"messages": [{"role": "user", "content": f"{name}{i}"}]}} for i, side in enumerate(sides)]
        (tmp_path / name / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))
    monkeypatch.setattr("treeqa.lm.provider.train_adapter", train_adapter)
    run_cli("train", "lora", "--set", str(tmp_path / "a"), "--set", str(tmp_path / "b"), "--out", str(tmp_path / "o"))
    assert seen["train"] == ["a0", "b0", "b1"]
    assert seen["validation"] == ["a1", "b2", "a2"]
    run_cli("train", "lora", "--set", str(tmp_path / "a"), "--set", str(tmp_path / "b"), "--out", str(tmp_path / "o"),
            "--validation-reads", "2")
    assert seen["validation"] == ["a1", "b2"]


def test_yes_no_built_trains_on_every_built_read_of_a_yes_no_question(tmp_path, monkeypatch):
    seen = []

    def train_adapter(chats, out, recipe, **kwargs):
        seen.append([c["messages"][0]["content"] for c in chats])
        raise SystemExit(0)  # stop before any model is loaded

    (tmp_path / "s").mkdir()
    reads = [{"id": f"{q}:{kind}", "question_id": q, "side": "train", "kind": kind, "pick": pick, "answer": answer,
              "chat": {"messages": [{"role": "user", "content": f"{q}:{kind}"}]}}
             for q, answer in (("y", "yes"), ("p", "Paris")) for pick, kind in enumerate(("own", "gold", "partial"))]
    (tmp_path / "s" / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))
    monkeypatch.setattr("treeqa.lm.provider.train_adapter", train_adapter)
    for extra in ([], ["--yes-no-built"]):
        run_cli("train", "lora", "--set", str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--per-question", "1",
                *extra)
    assert seen == [["y:own", "p:own"], ["y:own", "y:gold", "y:partial", "p:own"]]
    from treeqa.train.reads import hashed_order

    run_cli("train", "lora", "--set", str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--per-question", "1",
            "--yes-no-built", "--limit", "2")  # the first 2 of those 4 in the hashed order
    assert seen[-1] == [r["id"] for r in hashed_order([{"id": i} for i in seen[1]])][:2]


def test_a_stopped_training_says_how_to_resume_in_one_line(tmp_path, monkeypatch):
    def train_adapter(chats, out, recipe, **kwargs):
        raise KeyboardInterrupt  # what train_adapter raises after Ctrl-C, its adapter written

    write_set(tmp_path / "set")
    monkeypatch.setattr("treeqa.lm.provider.train_adapter", train_adapter)
    result = run_cli("train", "lora", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 130 and "Traceback" not in result.output
    assert "the same command resumes" in result.output and str(tmp_path / "out") in result.output


def write_reasoned_set(folder, validation_reason=True):
    """Two train reads with a kept reason, one without, two validation reads (one with a reason)."""
    folder.mkdir()
    sides = ["train"] * 3 + ["validation"] * 2
    reads = [{"id": f"q{i}:gold", "question_id": f"q{i}", "side": side, "kind": "gold", "question": f"Q{i}?",
              "passages": [f"P{i}: Paris."], "answer": "Paris",
              "chat": {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "x"}]}}
             for i, side in enumerate(sides)]
    (folder / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))
    how = {"q0:gold": "found", "q1:gold": "none", "q2:gold": "rationalised", "q3:gold": "found" if validation_reason
           else "none"}
    (folder / "reasons.jsonl").write_text("".join(json.dumps({"id": i, "how": h, "reasoning": f"{i} says Paris." if
                                                               h != "none" else ""}) + "\n" for i, h in how.items()))


def test_reasoned_only_trains_the_bare_reader_on_the_reads_with_reasons_is_the_control(tmp_path, monkeypatch):
    seen = {}

    def train_adapter(chats, out, recipe, validation=(), **kwargs):
        seen.update(train=[c["messages"] for c in chats], validation=[c["messages"] for c in validation])
        raise SystemExit(0)  # stop before any model is loaded

    write_reasoned_set(tmp_path / "s")
    monkeypatch.setattr("treeqa.lm.provider.train_adapter", train_adapter)
    args = ("train", "lora", "--set", str(tmp_path / "s"), "--out", str(tmp_path / "o"))
    run_cli(*args, "--reasoned-only")
    assert [m[0]["content"] for m in seen["train"]] == ["q0", "q2"]  # rta's own chats, q1 left out
    assert [m[0]["content"] for m in seen["validation"]] == ["q3", "q4"]
    run_cli(*args, "--with-reasons")
    assert [json.loads(m[-1]["content"])["reasoning"] for m in seen["train"]] == ["q0:gold says Paris.",
                                                                                  "q2:gold says Paris."]
    assert [json.loads(m[-1]["content"])["reasoning"] for m in seen["validation"]] == ["q3:gold says Paris."]
    both = run_cli(*args, "--with-reasons", "--reasoned-only")
    assert both.exit_code != 0 and "one of them at a time" in both.output


def test_with_reasons_and_no_validation_reason_is_refused_rather_than_trained_without_a_curve(tmp_path):
    write_reasoned_set(tmp_path / "s", validation_reason=False)
    result = run_cli("train", "lora", "--set", str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--with-reasons")
    assert result.exit_code != 0 and "--side validation" in result.output
    assert not (tmp_path / "o").exists()


def test_reasons_take_the_yes_no_built_reads_and_a_limit_in_the_hashed_order(tmp_path, monkeypatch):
    from treeqa.train.reads import hashed_order, read_set

    (tmp_path / "s").mkdir()
    reads = [{"id": f"{q}:{kind}", "question_id": q, "side": "train", "kind": kind, "pick": pick, "answer": answer,
              "question": f"{q}?", "passages": ["P"], "chat": {"messages": [{"role": "user", "content": "x"}]}}
             for q, answer in (("y", "yes"), ("p", "Paris"), ("r", "Rome")) for pick, kind in
             enumerate(("own", "gold", "partial"))]
    (tmp_path / "s" / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))
    lm, engine = scripted_lm(lambda kind, inputs: {"reasoning": "P says so.", "answer": "yes"})
    use_lm(monkeypatch, lm)
    result = run_cli("train", "reasons", "--set", str(tmp_path / "s"), "--yes-no-built", "--limit", "4")
    assert result.exit_code == 0, result.output
    written = [json.loads(line)["id"] for line in (tmp_path / "s" / "reasons.jsonl").read_text().splitlines()]
    chosen = hashed_order(read_set(tmp_path / "s", "train", 1, yes_no_built=True))
    assert len(chosen) == 5 and written == [r["id"] for r in chosen[:4]]
