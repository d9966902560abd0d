"""Train a LoRA adapter for the embedded model on a CPU: chat examples in, a GGUF adapter out.

Why this shape: on two cores a full training step of the 1.5B model over a 512-token read
costs ~41 s, and most of it is the frozen lower layers, which compute the same thing every
epoch. So only the top `top_layers` decoder layers carry LoRA; the hidden states entering them
are computed once per example and kept on disk (`LayerCache`), after which the lower layers
leave memory; the loss is on the answer tokens only, and the vocabulary projection runs on
those positions alone. Training checkpoints every few steps (`checkpoint.pt`) and a killed run
resumes there; a time budget, Ctrl-C or SIGTERM ends it early with what was learned so far.

The model is read from the same GGUF llama.cpp serves (transformers dequantises it), so the
adapter is trained against the weights it will be added to. `treeqa.lm.adapter` writes it in
llama.cpp's LoRA format.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import math
import os
import random
import resource
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

log = logging.getLogger(__name__)

LOWER_DTYPES = ("float32", "bfloat16")
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraRecipe:
    """What is trained and how. The defaults are the recipe the comparison of seven recipes chose
    on validation reads of training questions (benchmarks/runs/lora-recipes/table.md: eight layers,
    rank 16, lr 5e-4, one epoch, 41.5 validation EM against the base reader's 27.1); every
    trainer (`treeqa train lora`, `--optimizer finetune`, the trained-reader compiler) starts
    from them.

    Args:
        rank: LoRA rank r.
        alpha: LoRA alpha; the update is scaled by alpha / rank (as llama.cpp applies it).
        top_layers: how many of the last decoder layers carry LoRA; the rest are frozen and
            computed once per example.
        targets: the projections of those layers that get LoRA.
        learning_rate: AdamW's learning rate (linear warm-up over the first 10% of steps, then
            linear decay to 0).
        epochs: passes over the examples.
        accumulate: examples per optimizer step (batch size 1, gradients accumulated).
        max_tokens: an example longer than this (prompt and answer) is skipped and counted:
            cutting a read would train the model to answer from text it was not shown.
        seed: shuffling and LoRA initialisation.
        lower_dtype: the dtype the frozen lower layers run in ("float32" or "bfloat16"); their
            output is computed once an example, and bfloat16 makes that pass ~3.7x faster on a
            CPU with BF16 for a drift of under 1% in the hidden states (benchmarks/lora_train.md).
        top_dtype: what the trained layers compute in: "float32", or "bfloat16" (autocast: the
            LoRA weights, their gradients and AdamW's state stay float32, the matrix products run
            in bfloat16), which the issue's 8 s an example asks for on a CPU with BF16
            (benchmarks/lora_train.md). A recipe written before this field had float32, and its
            dict (hence a checkpoint's fingerprint) leaves the field out while it is float32.
    """

    rank: int = 16
    alpha: float = 32.0
    top_layers: int = 8
    targets: tuple[str, ...] = TARGET_MODULES
    learning_rate: float = 5e-4
    epochs: int = 1
    accumulate: int = 4
    max_tokens: int = 2048
    seed: int = 0
    lower_dtype: str = "float32"
    top_dtype: str = "float32"

    def __post_init__(self):
        for name in ("rank", "top_layers", "epochs", "accumulate", "max_tokens"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"LoRA recipe: {name} must be at least 1, got {getattr(self, name)!r}")
        if not self.learning_rate > 0 or not self.alpha > 0:
            raise ValueError("LoRA recipe: learning_rate and alpha must be positive")
        unknown = set(self.targets) - set(TARGET_MODULES)
        if unknown or not self.targets:
            raise ValueError(f"LoRA recipe: targets must be among {', '.join(TARGET_MODULES)}; got {self.targets!r}")
        if self.lower_dtype not in LOWER_DTYPES:
            raise ValueError(f"LoRA recipe: lower_dtype must be one of {', '.join(LOWER_DTYPES)}, "
                             f"got {self.lower_dtype!r}")
        if self.top_dtype not in LOWER_DTYPES:
            raise ValueError(f"LoRA recipe: top_dtype must be one of {', '.join(LOWER_DTYPES)}, "
                             f"got {self.top_dtype!r}")

    def to_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "targets": list(self.targets)}
        if self.top_dtype == "float32":  # as recipes were written before the field: old checkpoints resume
            out.pop("top_dtype")
        return out


@dataclass
class TokenizedExample:
    """One training example: the prompt's token ids and the answer's (the loss is on the answer)."""

    prompt: list[int]
    answer: list[int]

    def __len__(self) -> int:
        return len(self.prompt) + len(self.answer)

    def key(self) -> str:
        return hashlib.sha256(json.dumps([self.prompt, self.answer]).encode()).hexdigest()


@dataclass
class TrainReport:
    """What a training did: figures a benchmark prints and `compiled.json` records."""

    examples: int
    skipped_too_long: int
    steps_done: int
    steps_total: int
    seconds: float
    seconds_caching: float
    seconds_training: float
    mean_tokens: float
    first_loss: float | None
    last_loss: float | None
    peak_rss_gb: float
    finished: bool
    losses: list[float] = field(default_factory=list, repr=False)
    curve: list[dict[str, Any]] = field(default_factory=list, repr=False)
    best: dict[str, Any] | None = None
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM (`_StopOnSignal`), not by the budget

    @property
    def seconds_per_example(self) -> float:
        """Wall seconds per example-epoch, caching included."""
        done = self.steps_done  # steps are examples here (one example a backward pass)
        return self.seconds / done if done else float("nan")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("losses")
        out["seconds_per_example"] = round(self.seconds_per_example, 2)
        return out


def native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX): there bfloat16 halves
    the training's time (benchmarks/lora_train.md); elsewhere torch emulates it, so float32 stays."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the system (glibc's `malloc_trim`); False where the C
    library has none. Why: glibc slides its mmap threshold up to each large block freed, so a
    training's tensors, whose sizes vary with each read, come from a heap that fragments and
    keeps them resident (8.8 -> 13.8 GiB over 320 reads). Once an example costs no measurable
    time and keeps the process at its working set (benchmarks/lora_memory.md)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


def chat_tokens(tokenizer, messages: Sequence[dict[str, str]]) -> TokenizedExample:
    """Prompt and answer token ids of a chat whose last message is the assistant's answer,
    formatted by the model's own chat template (the one llama.cpp applies when serving): the
    prompt ends with the assistant turn's opening, the answer ends with the end-of-turn token
    so the model learns to stop."""
    messages = [dict(m) for m in messages]
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("a training chat must end with the assistant's message")
    prompt_text = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    full_text = tokenizer.apply_chat_template(messages, tokenize=False)
    if not full_text.startswith(prompt_text):
        raise ValueError("the chat template does not render the prompt as a prefix of the whole chat")
    answer_text = full_text[len(prompt_text):].rstrip("\n")  # up to and with the end-of-turn marker
    prompt = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    answer = tokenizer(answer_text, add_special_tokens=False)["input_ids"]
    return TokenizedExample(list(prompt), list(answer))


def decoder_layers(model):
    """The decoder layers of a causal LM (Qwen2/Llama layout: model.model.layers)."""
    return model.get_decoder().layers


def run_layers(model, layers, hidden, position_ids):
    """Run `layers` over `hidden` (batch 1, causal), with the model's rotary embeddings."""
    position_embeddings = model.get_decoder().rotary_emb(hidden, position_ids)
    for layer in layers:
        out = layer(hidden, attention_mask=None, position_ids=position_ids, position_embeddings=position_embeddings)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


class LayerCache:
    """The hidden states entering the trained layers, one file per example, keyed by the base
    weights, the split point and the example's tokens (a change of any of them is a miss)."""

    def __init__(self, folder: Path, base_id: str, split: int):
        self.folder = Path(folder) / hashlib.sha256(f"{base_id}:{split}".encode()).hexdigest()[:16]
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, example: TokenizedExample) -> Path:
        return self.folder / f"{example.key()[:32]}.pt"

    def get(self, example: TokenizedExample):
        import torch  # heavy: the layer cache is only read while training

        path = self.path(example)
        if not path.is_file():
            return None
        try:
            hidden = torch.load(path, weights_only=True)
        except Exception:  # noqa: BLE001 - a torn file from a killed run: computed again
            return None
        return hidden if hidden.shape[1] == len(example) else None

    def put(self, example: TokenizedExample, hidden) -> None:
        import torch  # heavy: the layer cache is only written while training

        path = self.path(example)
        tmp = path.with_suffix(".tmp")
        torch.save(hidden.contiguous(), tmp)
        os.replace(tmp, path)


def _lr_at(step: int, total: int, peak: float) -> float:
    warmup = max(1, total // 10)
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(0.0, (total - step) / max(1, total - warmup))


@dataclass
class _Progress:
    """Where one `LoraTrainer.train` call is, shared by its steps: examples done and their
    losses, the seconds spent caching and training, and whether it ran to the end."""

    step: int
    losses: list[float]
    caching: float = 0.0
    training: float = 0.0
    finished: bool = True


class _StopOnSignal:
    """Ctrl-C or SIGTERM during a training asks it to stop after the current example, as a spent
    budget does: the stop is checkpointed and validated, so its adapter is the best point so far
    and the same command resumes. A second signal stops at once (KeyboardInterrupt), losing what
    came after the last checkpoint. Off the main thread, where Python takes no signal handler,
    signals act as before."""

    def __init__(self) -> None:
        self.asked: int | None = None
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._ask) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _ask(self, signum: int, frame: Any) -> None:
        if self.asked is not None:
            raise KeyboardInterrupt
        self.asked = signum
        log.warning("%s: stopping after this example, checkpointed (again to stop at once)",
                    signal.Signals(signum).name)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}


class LoraTrainer:
    """LoRA on the top layers of a transformers causal LM (see module doc).

    Args:
        model: a transformers causal LM in float32 (`load_gguf_model` reads the embedded one).
        tokenizer: its tokenizer, with the chat template.
        recipe: the LoraRecipe.
        base_id: names the base weights (the GGUF's sha256): the layer cache is keyed by it.
        work_dir: checkpoints live here.
        cache_dir: the layer cache (gigabytes for hundreds of examples: keep it out of a run
            folder that is committed); default `work_dir/layer-cache`.
    """

    def __init__(self, model, tokenizer, recipe: LoraRecipe, base_id: str, work_dir: str | Path,
                 cache_dir: str | Path | None = None):
        # heavy: torch and peft load when a trainer is made, not with LoraRecipe (read at CLI start)
        import torch
        from peft import LoraConfig, get_peft_model

        self.recipe, self.tokenizer, self.base_id = recipe, tokenizer, base_id
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        n_layers = len(decoder_layers(model))
        if recipe.top_layers > n_layers:
            raise ValueError(f"LoRA recipe: top_layers={recipe.top_layers} but the model has {n_layers} layers")
        self.split = n_layers - recipe.top_layers
        torch.manual_seed(recipe.seed)
        config = LoraConfig(r=recipe.rank, lora_alpha=recipe.alpha, lora_dropout=0.0, bias="none",
                            target_modules=list(recipe.targets), layers_to_transform=list(range(self.split, n_layers)),
                            task_type="CAUSAL_LM")
        model.requires_grad_(False)
        self.device = next(model.parameters()).device  # where the model is: the CPU, or a GPU (`--device`)
        self.lower_dtype = getattr(torch, recipe.lower_dtype)
        for layer in decoder_layers(model)[: self.split]:
            layer.to(self.lower_dtype)
        for layer in decoder_layers(model)[self.split:]:  # float32 weights, even in a model a lower split left bf16
            layer.to(torch.float32)
        self.model = get_peft_model(model, config)
        self.base = self.model.get_base_model()
        cache_key = base_id if recipe.lower_dtype == "float32" else f"{base_id}:{recipe.lower_dtype}"
        self.cache = LayerCache(Path(cache_dir) if cache_dir else self.work_dir / "layer-cache", cache_key, self.split)
        self.curve: list[dict[str, Any]] = []
        self.best: dict[str, Any] | None = None  # {"step", "val_loss"} of the best validation point

    # -- the two halves of the forward pass ------------------------------------------------
    def lower_hidden(self, example: TokenizedExample):
        """The hidden states entering layer `split`, from the cache or computed (no grad)."""
        import torch  # heavy: loaded by a training, not by this module's import

        hidden = self.cache.get(example)
        if hidden is not None:
            return hidden.to(self.device)
        ids = torch.tensor([example.prompt + example.answer], device=self.device)
        with torch.no_grad():
            hidden = self.base.get_input_embeddings()(ids).to(self.lower_dtype)
            positions = torch.arange(ids.shape[1], device=self.device).unsqueeze(0)
            hidden = run_layers(self.base, decoder_layers(self.base)[: self.split], hidden, positions)
            hidden = hidden.to(torch.float32)
        self.cache.put(example, hidden.cpu())
        return hidden

    def answer_loss(self, example: TokenizedExample, hidden):
        """Mean cross-entropy of the answer tokens, through the trained layers."""
        # heavy: torch is loaded by a training, not by this module's import
        import torch
        import torch.nn.functional as F

        positions = torch.arange(hidden.shape[1], device=self.device).unsqueeze(0)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.recipe.top_dtype == "bfloat16"):
            top = run_layers(self.base, decoder_layers(self.base)[self.split:], hidden, positions)
            start = len(example.prompt) - 1  # the position that predicts the first answer token
            states = self.base.get_decoder().norm(top[0, start:start + len(example.answer)])
            logits = self.base.get_output_embeddings()(states)
        return F.cross_entropy(logits.float(), torch.tensor(example.answer, device=self.device))

    def full_loss(self, example: TokenizedExample):
        """The same loss through the model's own forward pass (for checking the split path)."""
        # heavy: torch is loaded by a training (this check runs one), not by this module's import
        import torch
        import torch.nn.functional as F

        ids = torch.tensor([example.prompt + example.answer], device=self.device)
        logits = self.model(input_ids=ids).logits[0]
        start = len(example.prompt) - 1
        return F.cross_entropy(logits[start:start + len(example.answer)].float(),
                               torch.tensor(example.answer, device=self.device))

    # -- training ------------------------------------------------------------------------
    def trainable(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def fingerprint(self, examples: Sequence[TokenizedExample], validation: Sequence[TokenizedExample] = ()) -> str:
        digest = hashlib.sha256(json.dumps({"base": self.base_id, "recipe": self.recipe.to_dict()}).encode())
        for example in examples:
            digest.update(example.key().encode())
        if validation:
            digest.update(b"validation")
            for example in validation:
                digest.update(example.key().encode())
        return digest.hexdigest()

    def train(self, examples: Sequence[TokenizedExample], *, budget_s: float | None = None,
              checkpoint_every: int = 8, progress: bool = True,
              on_step: Callable[[int, float], None] | None = None,
              validation: Sequence[TokenizedExample] = (), validate_every: int | None = None) -> TrainReport:
        """Train on `examples` (resuming from `work_dir/checkpoint.pt` when it is of the same
        examples, recipe and base); stops early, checkpointed, when `budget_s` is spent or on
        Ctrl-C or SIGTERM (`_StopOnSignal`).

        With `validation` examples, their mean answer loss is measured every `validate_every`
        examples (a multiple of the recipe's `accumulate`) and at the end; each point goes to
        `self.curve`, and the weights of the best point are kept in `work_dir/best-STEP.pt`
        (`best_lora_state`), so more epochs than needed cost time, not quality."""
        import torch  # heavy: loaded by a training, not by this module's import

        started = time.perf_counter()
        kept, skipped = self._fitting(examples)
        validation = [ex for ex in validation if len(ex) <= self.recipe.max_tokens and ex.answer]
        if validation and validate_every is not None and validate_every % self.recipe.accumulate:
            raise ValueError(f"validate_every ({validate_every}) must be a multiple of accumulate "
                             f"({self.recipe.accumulate}): a point is measured after an optimizer step")
        order = self._order(len(kept))
        total = len(order)
        optimizer = torch.optim.AdamW(self.trainable(), lr=self.recipe.learning_rate, weight_decay=0.0)
        fingerprint = self.fingerprint(kept, validation)
        self._started, self._spent_before = started, {}
        run = _Progress(*self._resume(optimizer, fingerprint, total))
        run.caching = self._warm_cache(kept, run.step)
        if validation and not any(point["step"] == 0 for point in self.curve):
            self._base_point(validation, run.losses)  # the base model's own loss starts the curve
        bar = tqdm(total=total, initial=run.step, desc="training LoRA", unit="ex", disable=not progress)
        self.model.train()
        optimizer.zero_grad()
        stop = _StopOnSignal()
        try:
            while run.step < total:
                if stop.asked or (budget_s is not None and time.perf_counter() - started > budget_s):
                    run.finished = False
                    break
                self._train_on(kept[order[run.step]], run, optimizer, fingerprint, total, checkpoint_every)
                bar.set_postfix(loss=f"{sum(run.losses[-16:]) / len(run.losses[-16:]):.3f}")
                bar.update()
                if validation and validate_every and run.step % validate_every == 0 and run.step < total:
                    self.validate(validation, run.step, run.losses)
                    self._checkpoint(optimizer, fingerprint, run)
                if on_step is not None:
                    on_step(run.step, run.losses[-1])
        finally:
            stop.restore()
            bar.close()
        if validation and run.step == total and (not self.curve or self.curve[-1]["step"] != total):
            self.validate(validation, run.step, run.losses)
        self._settle(run, optimizer, fingerprint, total)
        if validation and run.step and self.curve[-1]["step"] != run.step:
            # a stop by the budget gets its own point, so the best weights so far are known
            self.validate(validation, run.step, run.losses)
            self._checkpoint(optimizer, fingerprint, run)
        report = self._report(kept, skipped, run, total, started)
        report.interrupted = stop.asked is not None and not report.finished  # one during the last example: done
        return report

    def validation_loss(self, validation: Sequence[TokenizedExample]) -> float:
        """Mean answer loss over `validation`, without gradients (lower layers from the cache)."""
        import torch  # heavy: loaded by a training, not by this module's import

        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for ex in validation:
                total += float(self.answer_loss(ex, self.lower_hidden(ex)))
                release_freed_memory()
        self.model.train()
        return total / len(validation)

    def validate(self, validation: Sequence[TokenizedExample], step: int, losses: list[float]) -> dict[str, Any]:
        """One point of the curve: the validation loss now, and the mean training loss since the
        last point; the best point's weights are written to `work_dir/best-STEP.pt`."""
        import torch  # heavy: loaded by a training, not by this module's import

        since = self.curve[-1]["step"] if self.curve else 0
        recent = losses[since:step]
        point = {"step": step, "train_loss": round(sum(recent) / len(recent), 4) if recent else None,
                 "val_loss": round(self.validation_loss(validation), 4)}
        self.curve.append(point)
        log.info("validation at example %d: loss %.4f (train %s)", step, point["val_loss"], point["train_loss"])
        if self.best is None or point["val_loss"] < self.best["val_loss"]:
            self.best = {"step": step, "val_loss": point["val_loss"]}
            path = self._best_path()
            tmp = path.with_suffix(".tmp")
            torch.save({"best": self.best, "lora": self.lora_state()}, tmp)
            os.replace(tmp, path)
        return point

    def _base_point(self, validation: Sequence[TokenizedExample], losses: list[float]) -> None:
        """Step 0 of the curve, the base model's loss; measured late (first in the curve) for a
        run that resumes a checkpoint from before step 0 was measured. Its weights are LoRA's
        with B zeroed, which leave the base model as it is."""
        import torch  # heavy: loaded by a training, not by this module's import

        if not self.curve:
            self.validate(validation, 0, losses)
            return
        with self.model.disable_adapter():
            point = {"step": 0, "train_loss": None, "val_loss": round(self.validation_loss(validation), 4)}
        self.curve.insert(0, point)
        log.info("validation of the base model: loss %.4f", point["val_loss"])
        if self.best is None or point["val_loss"] < self.best["val_loss"]:
            self.best = {"step": 0, "val_loss": point["val_loss"]}
            zero = {k: torch.zeros_like(v) if "lora_B" in k else v for k, v in self.lora_state().items()}
            torch.save({"best": self.best, "lora": zero}, self._best_path())

    def _best_path(self) -> Path:
        """The best point's weights, named by its step: a run killed between writing a new best and
        its checkpoint resumes with the older best, whose file is still there."""
        return self.work_dir / f"best-{self.best['step']}.pt"

    def best_lora_state(self) -> dict[str, Any]:
        """The weights of the best validation point, or the current ones without validation."""
        import torch  # heavy: loaded by a training, not by this module's import

        if self.best is None:
            return self.lora_state()
        path = self._best_path()
        state = torch.load(path, weights_only=True)
        if state.get("best") != self.best:
            raise ValueError(f"{path} holds another point than the curve's best ({self.best}): train again")
        return state["lora"]

    def _fitting(self, examples: Sequence[TokenizedExample]) -> tuple[list[TokenizedExample], int]:
        """The examples that fit `max_tokens` and have an answer, and how many did not: a cut read
        would train the model to answer from text it was not shown."""
        kept = [ex for ex in examples if len(ex) <= self.recipe.max_tokens and ex.answer]
        if not kept:
            raise ValueError(f"no training example fits {self.recipe.max_tokens} tokens ({len(examples)} given)")
        return kept, len(examples) - len(kept)

    def _order(self, n: int) -> list[int]:
        """The examples' indices, each epoch shuffled by the recipe's seed, so a resumed run (which
        restarts at a step of this order) sees the same sequence."""
        order = []
        rng = random.Random(self.recipe.seed)
        for _ in range(self.recipe.epochs):
            epoch = list(range(n))
            rng.shuffle(epoch)
            order += epoch
        return order

    def _warm_cache(self, kept: list[TokenizedExample], step: int) -> float:
        """With several epochs, compute every example's lower hidden states first, so the lower
        layers can leave memory before training; the seconds spent."""
        caching = 0.0
        for i in range(step, len(kept)) if self.recipe.epochs > 1 else ():
            t0 = time.perf_counter()
            self.lower_hidden(kept[i])
            release_freed_memory()
            caching += time.perf_counter() - t0
        return caching

    def _train_on(self, example: TokenizedExample, run: _Progress, optimizer, fingerprint: str, total: int,
                  checkpoint_every: int) -> None:
        """One example's backward pass; at each `accumulate`-th example (and the last) the
        optimizer step at the schedule's learning rate, checkpointed every `checkpoint_every`."""
        import torch  # heavy: loaded by a training, not by this module's import

        recipe = self.recipe
        t0 = time.perf_counter()
        hidden = self.lower_hidden(example)
        t1 = time.perf_counter()
        loss = self.answer_loss(example, hidden)
        (loss / recipe.accumulate).backward()
        run.step += 1
        run.losses.append(loss.item())
        if run.step % recipe.accumulate == 0 or run.step == total:
            updates = math.ceil(total / recipe.accumulate)
            for group in optimizer.param_groups:
                group["lr"] = _lr_at((run.step - 1) // recipe.accumulate, updates, recipe.learning_rate)
            torch.nn.utils.clip_grad_norm_(self.trainable(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            if (run.step // recipe.accumulate) % max(1, checkpoint_every // recipe.accumulate) == 0:
                self._checkpoint(optimizer, fingerprint, run)
        run.caching += t1 - t0
        run.training += time.perf_counter() - t1
        release_freed_memory()

    def _settle(self, run: _Progress, optimizer, fingerprint: str, total: int) -> None:
        """At the end or a stop: drop a partial accumulation (never applied, so a resumed run
        redoes those examples), checkpoint, and leave the model in eval mode."""
        if run.step < total and run.step % self.recipe.accumulate:
            optimizer.zero_grad()
            run.step -= run.step % self.recipe.accumulate
            run.losses = run.losses[:run.step]
        self._checkpoint(optimizer, fingerprint, run)
        self.model.eval()

    def _spent(self, run: _Progress) -> dict[str, float]:
        """Seconds and peak RSS over every run of this training, the killed or stopped ones before
        this one included (they come with the checkpoint), so a resumed training's report is the
        whole training's and not its last run's."""
        before = self._spent_before
        return {"seconds": before.get("seconds", 0.0) + time.perf_counter() - self._started,
                "seconds_caching": before.get("seconds_caching", 0.0) + run.caching,
                "seconds_training": before.get("seconds_training", 0.0) + run.training,
                "peak_rss_gb": max(before.get("peak_rss_gb", 0.0), peak_rss_gb())}

    def _report(self, kept: list[TokenizedExample], skipped: int, run: _Progress, total: int,
                started: float) -> TrainReport:
        """The figures of this training over all its runs (the first and last losses are means of up to 8)."""
        losses, n = run.losses, len(run.losses)
        spent = self._spent(run)
        return TrainReport(examples=len(kept), skipped_too_long=skipped, steps_done=run.step, steps_total=total,
                           seconds=round(spent["seconds"], 1), seconds_caching=round(spent["seconds_caching"], 1),
                           seconds_training=round(spent["seconds_training"], 1),
                           mean_tokens=round(sum(len(ex) for ex in kept) / len(kept), 1),
                           first_loss=round(sum(losses[:8]) / min(8, n), 4) if n else None,
                           last_loss=round(sum(losses[-8:]) / min(8, n), 4) if n else None,
                           peak_rss_gb=round(spent["peak_rss_gb"], 2), finished=run.finished and run.step == total,
                           losses=losses, curve=list(self.curve), best=self.best)

    def lora_state(self) -> dict[str, Any]:
        from peft import get_peft_model_state_dict  # heavy (brings torch): loaded by a training

        return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}

    def _checkpoint(self, optimizer, fingerprint: str, run: _Progress) -> None:
        import torch  # heavy: loaded by a training, not by this module's import

        path = self.work_dir / "checkpoint.pt"
        tmp = path.with_suffix(".tmp")
        torch.save({"fingerprint": fingerprint, "step": run.step, "losses": run.losses, "lora": self.lora_state(),
                    "optimizer": optimizer.state_dict(), "curve": self.curve, "best": self.best,
                    "spent": self._spent(run)}, tmp)
        os.replace(tmp, path)
        for stale in self.work_dir.glob("best-*.pt"):  # only the checkpoint's best is needed from now on
            if self.best is None or stale != self._best_path():
                stale.unlink(missing_ok=True)

    def _resume(self, optimizer, fingerprint: str, total: int) -> tuple[int, list[float]]:
        # heavy: torch and peft load when a training resumes, not with this module
        import torch
        from peft import set_peft_model_state_dict

        path = self.work_dir / "checkpoint.pt"
        if not path.is_file():
            return 0, []
        try:
            state = torch.load(path, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - a torn checkpoint: start over, say so
            log.warning("%s unreadable (%s): training from the start", path, exc)
            return 0, []
        if state.get("fingerprint") != fingerprint:
            log.warning("%s is of other examples, recipe or base weights: training from the start", path)
            return 0, []
        step, losses = state.get("step"), state.get("losses")
        if type(step) is not int or not 0 <= step <= total or not isinstance(losses, list) or len(losses) != step:
            # an edited step (10000 of 48) would skip the training and call the untrained adapter done
            log.warning("%s says example %s of %d, with %s losses: not a point of this training; training from "
                        "the start", path, str(step)[:40], total, len(losses) if isinstance(losses, list) else "no")
            return 0, []
        set_peft_model_state_dict(self.model, state["lora"])
        optimizer.load_state_dict(state["optimizer"])
        self.curve = [dict(point) for point in state.get("curve") or [] if point["step"] <= state["step"]]
        self.best = dict(state["best"]) if state.get("best") and state["best"]["step"] <= state["step"] else None
        spent = state.get("spent")  # absent from checkpoints written before it was kept
        if isinstance(spent, dict) and all(isinstance(v, float) for v in spent.values()):
            self._spent_before = spent
        log.info("resuming LoRA training at example %d", state["step"])
        return int(state["step"]), list(state["losses"])
