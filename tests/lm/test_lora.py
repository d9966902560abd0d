"""LoRA training of the reader (treeqa.lm.lora, .adapter, .provider) on a tiny random Qwen2
model: the split forward pass equals the model's own, training lowers the answer loss and
touches only the top layers, a killed training resumes to the same weights, the adapter is
written in llama.cpp's layout and refused when it changed."""

import json
import os
import signal
import time

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.fakes import tiny_model, tiny_tokenizer  # noqa: E402
from treeqa.lm.adapter import AdapterError, AdapterRef, read_adapter, write_adapter  # noqa: E402
from treeqa.lm.lora import LoraRecipe, LoraTrainer, TokenizedExample, chat_tokens  # noqa: E402


def examples(n: int = 8) -> list[TokenizedExample]:
    out = []
    for i in range(n):
        prompt = [1, 3 + i % 5, 4, 5, 6, 7 + i % 3, 8, 2, 1, 5]
        out.append(TokenizedExample(prompt=prompt, answer=[18 + i % 2, 2]))
    return out


def test_chat_tokens_split_prompt_and_answer_at_the_assistant_turn():
    tok = tiny_tokenizer()
    chat = [{"role": "user", "content": "what is the capital of france"},
            {"role": "assistant", "content": '{"answer": "paris"}'}]
    ex = chat_tokens(tok, chat)
    assert tok.decode(ex.prompt).replace(" ", "").endswith("<|im_start|>assistant")
    assert tok.convert_ids_to_tokens(ex.answer)[-1] == "<|im_end|>"  # the model learns to stop
    assert "paris" in tok.convert_ids_to_tokens(ex.answer)
    with pytest.raises(ValueError, match="assistant"):
        chat_tokens(tok, chat[:1])


def test_split_forward_equals_the_models_own(tmp_path):
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=2), "tiny", tmp_path)
    with torch.no_grad():  # LoRA B starts at zero: give it weights so the top layers differ from the base
        for p in trainer.trainable():
            p.normal_(0, 0.1)
    ex = examples(1)[0]
    split = trainer.answer_loss(ex, trainer.lower_hidden(ex))
    assert float(split) == pytest.approx(float(trainer.full_loss(ex)), abs=1e-5)
    assert trainer.cache.get(ex) is not None  # the lower layers' output was kept


def test_training_lowers_the_answer_loss_and_trains_only_the_top_layers(tmp_path):
    model = tiny_model()
    lower_before = [p.detach().clone() for p in model.model.layers[0].parameters()]
    trainer = LoraTrainer(model, tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=6,
                                                              learning_rate=3e-2, accumulate=2), "tiny", tmp_path)
    names = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert names and all(".layers.2." in n or ".layers.3." in n for n in names)
    report = trainer.train(examples(), progress=False)
    assert report.finished and report.steps_done == report.steps_total == 48
    assert report.last_loss < 0.5 * report.first_loss
    assert all(torch.equal(a, b) for a, b in zip(lower_before, model.model.layers[0].parameters(), strict=True))


def test_a_killed_training_resumes_to_the_same_weights(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=2, learning_rate=5e-3, accumulate=2)
    whole = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path / "whole")
    whole.train(examples(), progress=False)

    class Killed(Exception):
        pass

    def kill_at(step, loss):
        if step == 7:
            raise Killed

    first = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path / "killed")
    with pytest.raises(Killed):
        first.train(examples(), progress=False, checkpoint_every=4, on_step=kill_at)
    steps = []
    second = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path / "killed")
    report = second.train(examples(), progress=False, on_step=lambda step, loss: steps.append(step))
    assert steps[0] == 5  # resumed after the last checkpoint (4), not from the start
    assert report.finished
    for key, value in whole.lora_state().items():
        assert torch.allclose(value, second.lora_state()[key], atol=1e-6), key


def test_a_checkpoint_of_other_examples_is_not_resumed(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1)
    LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(examples(4), progress=False)
    steps = []
    LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(6), progress=False, on_step=lambda step, loss: steps.append(step))
    assert steps[0] == 1


def test_a_budget_stops_early_with_a_checkpoint(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1, epochs=3)
    report = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(), budget_s=0.0, progress=False)
    assert not report.finished and report.steps_done == 0
    assert (tmp_path / "checkpoint.pt").is_file()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_after_the_example_checkpointed_and_the_same_call_resumes(tmp_path, signum):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=2, epochs=2)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    def interrupt_at(step, loss):
        if step == 6:
            os.kill(os.getpid(), signum)

    stopped = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(), progress=False, on_step=interrupt_at, validation=examples(2), validate_every=4)
    assert not stopped.finished and stopped.steps_done == 6  # no further example ran
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path)
    steps = []
    report = trainer.train(examples(), progress=False, on_step=lambda step, loss: steps.append(step),
                           validation=examples(2), validate_every=4)
    assert steps[0] == 7 and report.finished and report.steps_done == 16
    assert 6 in [point["step"] for point in trainer.curve]  # the stop was validated


def test_a_signal_during_the_last_example_leaves_a_finished_training(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=2)

    def interrupt_at_the_end(step, loss):
        if step == 8:
            os.kill(os.getpid(), signal.SIGTERM)

    report = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(), progress=False, on_step=interrupt_at_the_end)
    assert report.finished and not report.interrupted  # its caller goes on with the whole adapter


def test_a_second_signal_stops_at_once(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1, epochs=2)
    before = signal.getsignal(signal.SIGINT)

    def interrupt_twice(step, loss):
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
            examples(), progress=False, on_step=interrupt_twice)
    assert signal.getsignal(signal.SIGINT) is before


def test_too_long_examples_are_skipped_and_counted(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1, max_tokens=12)
    long = TokenizedExample(prompt=list(range(1, 15)), answer=[18, 2])  # 16 tokens
    report = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        [*examples(2), long], progress=False)
    assert report.examples == 2 and report.skipped_too_long == 1


def test_recipe_refuses_nonsense():
    with pytest.raises(ValueError, match="top_layers"):
        LoraRecipe(top_layers=0)
    with pytest.raises(ValueError, match="targets"):
        LoraRecipe(targets=("lm_head",))


def test_adapter_is_written_in_llama_cpps_layout(tmp_path):
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=2), "tiny", tmp_path)
    path = write_adapter(trainer.lora_state(), tmp_path / "adapter.gguf", alpha=8)
    meta = read_adapter(path)
    assert meta["architecture"] == "qwen2" and meta["alpha"] == pytest.approx(8.0)
    shapes = meta["shapes"]
    assert len(shapes) == 2 * 2 * 7  # two layers, seven projections, A and B
    # ggml's order (ne0 first): lora_a is (in, rank), lora_b (rank, out): what llama.cpp checks
    assert shapes["blk.3.attn_q.weight.lora_a"] == (32, 4)
    assert shapes["blk.3.attn_k.weight.lora_b"] == (4, 16)  # 2 kv heads of 8
    assert shapes["blk.2.ffn_down.weight.lora_a"] == (64, 4)
    assert not any(name.startswith("blk.0.") or name.startswith("blk.1.") for name in shapes)


def test_adapter_ref_refuses_a_missing_changed_or_foreign_adapter(tmp_path, settings_env):
    settings_env(cache_dir=tmp_path / "cache")
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=1), "tiny", tmp_path)
    path = write_adapter(trainer.lora_state(), tmp_path / "run" / "adapter.gguf", alpha=8)
    ref = AdapterRef.of(path, tmp_path / "run", "base-sha", ["answer"])
    assert ref.file == "adapter.gguf"
    assert AdapterRef.from_dict(json.loads(json.dumps(ref.to_dict())), "x") == ref
    loaded = ref.verified_path(tmp_path / "run", "base-sha")  # a private copy of the hashed bytes
    assert loaded.read_bytes() == path.read_bytes() and loaded.parent == tmp_path / "cache" / "adapters"
    with pytest.raises(AdapterError, match="trained on base model"):
        ref.verified_path(tmp_path / "run", "other-sha")
    with open(path, "r+b") as fh:  # same size, one byte changed
        fh.seek(-1, 2)
        last = fh.read(1)
        fh.seek(-1, 2)
        fh.write(bytes([last[0] ^ 1]))
    with pytest.raises(AdapterError, match="changed since it was trained"):
        ref.verified_path(tmp_path / "run", "base-sha")
    path.unlink()
    with pytest.raises(AdapterError, match="missing"):
        ref.verified_path(tmp_path / "run", "base-sha")
    with pytest.raises(AdapterError, match="beside the compiled file"):
        AdapterRef.from_dict({**ref.to_dict(), "file": "../elsewhere.gguf"}, "x")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf")
    with pytest.raises(AdapterError, match="not a GGUF"):
        read_adapter(tmp_path / "junk.gguf")


def test_a_missing_adapter_with_the_released_readers_bytes_is_the_shipped_one(tmp_path, settings_env, monkeypatch):
    """A compiled file of the main command records the released adapter; the clone tracks no copy of
    it beside the file, so the package's own is loaded, checked by size and sha256. Other bytes are
    still missing."""
    settings_env(cache_dir=tmp_path / "cache")
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=1), "tiny", tmp_path)
    shipped = write_adapter(trainer.lora_state(), tmp_path / "package" / "adapter.gguf", alpha=8)
    monkeypatch.setattr("treeqa.lm.adapter.SHIPPED_ADAPTER", shipped)
    copy = tmp_path / "run" / "adapter-x.gguf"
    copy.parent.mkdir()
    copy.write_bytes(shipped.read_bytes())
    ref = AdapterRef.of(copy, tmp_path / "run", "base-sha", ["fuse"])
    copy.unlink()
    assert ref.verified_path(tmp_path / "run", "base-sha").read_bytes() == shipped.read_bytes()
    other = AdapterRef.from_dict({**ref.to_dict(), "sha256": "0" * 64}, "x")
    with pytest.raises(AdapterError, match="adapter-x.gguf is missing"):
        other.verified_path(tmp_path / "run", "base-sha")


def test_validation_points_make_a_curve_and_the_best_point_is_kept(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=4, learning_rate=3e-2, accumulate=2)
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path)
    held_out = examples(3)
    report = trainer.train(examples(), progress=False, validation=held_out, validate_every=8)
    steps = [point["step"] for point in report.curve]
    assert steps == [0, 8, 16, 24, 32]  # the base model's loss first
    assert report.curve[-1]["val_loss"] < report.curve[0]["val_loss"]
    best = min(report.curve, key=lambda point: point["val_loss"])
    assert report.best == {"step": best["step"], "val_loss": best["val_loss"]}
    assert [p.name for p in tmp_path.glob("best-*.pt")] == [f"best-{best['step']}.pt"]
    kept = trainer.best_lora_state()
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(trainer.model, kept)  # the kept weights give the best point's loss again
    assert trainer.validation_loss(held_out) == pytest.approx(best["val_loss"], abs=1e-3)
    with pytest.raises(ValueError, match="multiple of accumulate"):
        trainer.train(examples(), progress=False, validation=held_out, validate_every=3)


def test_a_resumed_training_keeps_its_curve_and_best_point(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=2, learning_rate=1e-2, accumulate=2)

    class Killed(Exception):
        pass

    def kill_at(step, loss):
        if step == 10:
            raise Killed

    with pytest.raises(Killed):
        LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
            examples(), progress=False, validation=examples(2), validate_every=4, on_step=kill_at)
    report = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(), progress=False, validation=examples(2), validate_every=4)
    assert [point["step"] for point in report.curve] == [0, 4, 8, 12, 16]
    assert report.finished and report.best["step"] in (4, 8, 12, 16)


class Killed(Exception):
    pass


def killed_at(n: int):
    def on_step(step, loss):
        if step == n:
            raise Killed
    return on_step


def test_a_resumed_training_reports_the_seconds_of_all_its_runs(tmp_path):
    """The v3 training was stopped and finished by a `--budget-s 0` run, whose report said 139 s:
    the seconds (and peak RSS) of the runs before it come with the checkpoint."""
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=2, accumulate=2)

    def slow_then_killed(step, loss):
        time.sleep(0.5)
        if step == 7:
            raise Killed

    with pytest.raises(Killed):  # checkpointed at 4, after three slow steps
        LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
            examples(), progress=False, checkpoint_every=4, on_step=slow_then_killed)
    resumed = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path)
    started = time.perf_counter()
    report = resumed.train(examples(), progress=False, budget_s=0)
    this_run = time.perf_counter() - started
    assert report.steps_done == 4 and not report.finished
    assert report.seconds - this_run >= 1.4  # the first run's 1.5 s of steps, however slow this run was
    assert report.peak_rss_gb > 0


def test_a_stop_by_the_budget_is_validated_and_its_best_point_kept(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=2, learning_rate=3e-2, accumulate=2)
    with pytest.raises(Killed):  # checkpoints at 4, 8, 12; validated at 0 and 8 only
        LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
            examples(), progress=False, validation=examples(2), validate_every=8, checkpoint_every=4,
            on_step=killed_at(14))
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path)
    report = trainer.train(examples(), budget_s=0.0, progress=False, validation=examples(2), validate_every=8)
    assert not report.finished and report.steps_done == 12
    assert [point["step"] for point in report.curve] == [0, 8, 12]  # the stop has its own point
    assert report.best == {"step": report.best["step"],
                           "val_loss": min(point["val_loss"] for point in report.curve)}
    resumed = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path)
    again = resumed.train(examples(), progress=False, validation=examples(2), validate_every=8)
    assert again.finished and [point["step"] for point in again.curve] == [0, 8, 12, 16]


def test_a_run_resumed_from_before_the_base_point_measures_it_first(tmp_path):
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=2, learning_rate=3e-2, accumulate=2)
    base_loss = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path / "base").validation_loss(
        examples(2))
    with pytest.raises(Killed):
        LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
            examples(), progress=False, validation=examples(2), validate_every=4, on_step=killed_at(10))
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    state["curve"] = [point for point in state["curve"] if point["step"]]  # as a run from before step 0 was
    state["best"] = min(state["curve"], key=lambda point: point["val_loss"])
    state["best"] = {"step": state["best"]["step"], "val_loss": state["best"]["val_loss"]}
    torch.save(state, tmp_path / "checkpoint.pt")
    report = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(), progress=False, validation=examples(2), validate_every=4)
    assert [point["step"] for point in report.curve][:2] == [0, 4]
    assert report.curve[0]["val_loss"] == pytest.approx(base_loss, abs=1e-3)
    assert report.curve[0]["train_loss"] is None


def test_bfloat16_lower_layers_stay_close_to_float32_and_cache_apart(tmp_path):
    ex = examples(1)[0]
    exact = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=2), "tiny",
                        tmp_path / "a", cache_dir=tmp_path / "cache")
    lower = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=2,
                                                                   lower_dtype="bfloat16"), "tiny",
                        tmp_path / "b", cache_dir=tmp_path / "cache")
    assert exact.cache.folder != lower.cache.folder  # a dtype change is a cache miss, never a mix
    a, b = exact.lower_hidden(ex), lower.lower_hidden(ex)
    assert b.dtype == torch.float32 and a.shape == b.shape
    assert float((a - b).norm() / a.norm()) < 0.05
    assert next(lower.model.get_base_model().model.layers[0].parameters()).dtype == torch.bfloat16
    assert next(lower.model.get_base_model().model.layers[3].parameters()).dtype == torch.float32
    with pytest.raises(ValueError, match="lower_dtype"):
        LoraRecipe(lower_dtype="int8")


def test_bfloat16_top_layers_train_float32_weights_close_to_float32_and_keep_old_fingerprints(tmp_path):
    """Autocast computes the trained layers in bfloat16: the loss stays near float32's, the LoRA
    weights and their gradients stay float32 and still learn, and a float32 recipe's dict (a
    checkpoint's fingerprint, a compiled file's record) is what it was before the field existed."""
    ex = examples(1)[0]
    base = LoraRecipe(rank=4, alpha=8, top_layers=2, epochs=6, learning_rate=3e-2, accumulate=2)
    exact = LoraTrainer(tiny_model(), tiny_tokenizer(), base, "tiny", tmp_path / "a")
    fast = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(**{**base.to_dict(), "targets": base.targets,
                                                                    "top_dtype": "bfloat16"}), "tiny", tmp_path / "b")
    a, b = exact.answer_loss(ex, exact.lower_hidden(ex)), fast.answer_loss(ex, fast.lower_hidden(ex))
    assert b.dtype == torch.float32 and float(b) == pytest.approx(float(a), rel=0.05)
    report = fast.train(examples(), progress=False)
    assert all(p.dtype == torch.float32 for p in fast.trainable())
    assert report.last_loss < 0.5 * report.first_loss
    assert "top_dtype" not in base.to_dict() and fast.recipe.to_dict()["top_dtype"] == "bfloat16"
    assert exact.fingerprint(examples()) != fast.fingerprint(examples())
    with pytest.raises(ValueError, match="top_dtype"):
        LoraRecipe(top_dtype="float16")


def test_9_an_edited_checkpoint_step_starts_over(tmp_path):
    """A checkpoint's step past its training (10000 of 4) is not a point of it: without this
    check the loop was skipped and the untrained adapter reported as finished."""
    recipe = LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1)
    LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(examples(4), progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    torch.save({**state, "step": 10000}, tmp_path / "checkpoint.pt")
    steps = []
    report = LoraTrainer(tiny_model(), tiny_tokenizer(), recipe, "tiny", tmp_path).train(
        examples(4), progress=False, on_step=lambda step, loss: steps.append(step))
    assert steps == [1, 2, 3, 4] and report.finished and report.steps_done == 4


def test_9_empty_replies_are_skipped_and_counted(tmp_path, settings_env):
    from treeqa.lm.provider import train_adapter

    settings_env(cache_dir=tmp_path / "cache")
    model = tiny_model()
    model.base_id = "tiny"

    def chat(reply):
        return {"messages": [{"role": "user", "content": "capital of france?"},
                             {"role": "assistant", "content": reply}]}

    chats = [chat('{"answer": "paris"}'), chat(""), chat('{"answer": "rome"}'), chat("  \n")]
    _, report = train_adapter(chats, tmp_path / "run", LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1),
                              progress=False, base=(tiny_tokenizer(), model))
    record = json.loads((tmp_path / "run" / "training.json").read_text())
    assert report.examples == 2 and record["train_data"]["chats"] == 2
    assert record["train_data"]["empty_replies_skipped"] == 2
    trained = (tmp_path / "run" / "train-data.jsonl").read_text().splitlines()
    assert [json.loads(line)["messages"][-1]["content"] for line in trained] == ['{"answer": "paris"}',
                                                                                 '{"answer": "rome"}']


def test_an_interrupted_training_writes_its_adapter_then_stops_its_caller(tmp_path, settings_env, monkeypatch):
    """`optimize --optimizer finetune` must not go on to compile with a half-trained adapter after
    Ctrl-C: `train_adapter` writes what was learned, then raises KeyboardInterrupt."""
    from treeqa.lm import lora
    from treeqa.lm.provider import train_adapter

    settings_env(cache_dir=tmp_path / "cache")
    model = tiny_model()
    model.base_id = "tiny"
    train_on = lora.LoraTrainer._train_on

    def train_on_then_interrupt(self, example, run, *args):
        train_on(self, example, run, *args)
        if run.step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(lora.LoraTrainer, "_train_on", train_on_then_interrupt)
    chats = [{"messages": [{"role": "user", "content": f"capital number {i}?"},
                           {"role": "assistant", "content": '{"answer": "paris"}'}]} for i in range(4)]
    with pytest.raises(KeyboardInterrupt):
        train_adapter(chats, tmp_path / "run", LoraRecipe(rank=4, alpha=8, top_layers=1, accumulate=1),
                      progress=False, base=(tiny_tokenizer(), model))
    record = json.loads((tmp_path / "run" / "training.json").read_text())
    assert record["report"]["interrupted"] and record["report"]["steps_done"] == 2
    assert not record["report"]["finished"] and (tmp_path / "run" / "adapter.gguf").is_file()
