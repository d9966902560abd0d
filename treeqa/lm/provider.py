"""DSPy's fine-tuning interface for the embedded model, so `dspy.BootstrapFinetune` and
`dspy.BetterTogether` compile its weights on this machine.

DSPy hands a provider chat-format training data (`{"messages": [...]}` per call, the exact
prompt the predictor sends and the reply it should give) and expects back a model name; the
LM is then copied under that name. Here `finetune` trains a LoRA adapter on the embedded
GGUF's own weights (`treeqa.lm.lora`, CPU, or a GPU where torch sees one), writes it in
llama.cpp's format (`treeqa.lm.adapter`) and names the model after the adapter's hash;
`EmbeddedLM.copy` turns that name into an engine that loads the adapter. DSPy's own local
provider trains with TRL and serves with SGLang, neither of which reads a GGUF.

`train_kwargs` (DSPy's name) may hold: `out_dir` (where the training data record, the
checkpoints and the adapter go; default under the cache dir, keyed by the data), `recipe`
(`LoraRecipe` fields), `budget_s` (stop early, checkpointed), `extra_data` (more chats to
train on, e.g. gold reads), `progress`, and `base` ((tokenizer, model) to train instead of the
embedded GGUF).
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

import dspy
from dspy.clients.provider import Provider, TrainingJob

from treeqa.lm.adapter import sha256_of, write_adapter
from treeqa.lm.lora import LoraRecipe, LoraTrainer, chat_tokens, release_freed_memory
from treeqa.settings import get_settings

log = logging.getLogger(__name__)

_adapters: dict[str, Path] = {}
_adapters_lock = threading.Lock()


def register_adapter(path: str | Path) -> str:
    """The model name DSPy will know an adapter by (base model + the adapter's hash)."""
    # late: the LM door (treeqa.lm) imports this module on first use (a circle)
    from treeqa.lm import local_model_id

    path = Path(path).resolve()
    name = local_model_id(path)
    with _adapters_lock:
        _adapters[name] = path
    return name


class EmbeddedLM(dspy.LM):
    """`dspy.LM` on the embedded engine; a copy under an adapter's model name (what a
    fine-tuning returns) runs on an engine with that adapter loaded."""

    def copy(self, **kwargs):
        model = kwargs.get("model")
        if model and model != self.model and "engine" not in kwargs:
            # late: the LM door is read at call time, where tests replace its engine (treeqa.lm.local_engine)
            from treeqa.lm import local_engine

            with _adapters_lock:
                adapter = _adapters.get(model)
            if adapter is None and "+lora-" in model:
                raise ValueError(f"{model}: no adapter of that name was trained or loaded in this process")
            kwargs["engine"] = local_engine(adapter=str(adapter), lazy=True) if adapter is not None else local_engine()
        return super().copy(**kwargs)

    @property
    def adapter(self) -> Path | None:
        """The LoRA adapter this LM's engine adds to the weights, if any."""
        return getattr(self._engine_spec, "adapter", None)


class EmbeddedProvider(Provider):
    """Fine-tunes the embedded model with a LoRA adapter (see module doc)."""

    def __init__(self):
        super().__init__()
        self.finetunable = True

    @staticmethod
    def is_provider_model(model: str) -> bool:
        return model.startswith("local/")

    @staticmethod
    def finetune(job: TrainingJob, model: str, train_data: list[dict[str, Any]], train_data_format=None,
                 train_kwargs: dict[str, Any] | None = None) -> str:
        kwargs = dict(train_kwargs or {})
        chats = list(train_data) + list(kwargs.pop("extra_data", None) or [])
        fields = kwargs.pop("recipe", None) or {}
        recipe = LoraRecipe(**{k: tuple(v) if k == "targets" else v for k, v in fields.items()})
        out_dir = kwargs.pop("out_dir", None) or default_out_dir(chats, recipe)
        adapter, _ = train_adapter(chats, out_dir, recipe, budget_s=kwargs.pop("budget_s", None),
                                   progress=kwargs.pop("progress", True), base=kwargs.pop("base", None))
        if kwargs:
            log.warning("fine-tuning ignored unknown train_kwargs: %s", ", ".join(sorted(kwargs)))
        return register_adapter(adapter)


def default_out_dir(chats: list[dict], recipe) -> Path:
    digest = hashlib.sha256(json.dumps([chats, recipe.to_dict()], sort_keys=True, default=str).encode()).hexdigest()
    return get_settings().cache_dir / "finetune" / digest[:16]


def training_device(device: str = "auto") -> str:
    """"cpu", "cuda", or for "auto" cuda where torch sees one; "cuda" where torch sees none is an
    error, not a silent CPU run. The choice is logged."""
    import torch  # heavy: loaded when a training picks its device

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"training device is auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device here (a CPU build of torch, or no GPU)")
    chosen = device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    log.info("LoRA training on %s (asked: %s)", chosen, device)
    return chosen


def load_base(device: str = "cpu"):
    """(tokenizer, float32 model) of the embedded GGUF through transformers (dequantised: the
    adapter is trained against the very weights llama.cpp serves). ~70 s and ~7 GB on a CPU."""
    # heavy: torch and transformers load when a training reads the base model
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # late: the LM door (treeqa.lm) imports this module on first use (a circle)
    from treeqa.lm import model_path

    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return tokenizer, model.to(device)


def read_chats(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _empty_reply(chat: dict) -> bool:
    """Whether a training chat ends with an assistant's reply that is empty (or blank); a chat
    that ends otherwise is `chat_tokens`'s error."""
    messages = (chat.get("messages") or []) if isinstance(chat, dict) else []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    return last.get("role") == "assistant" and not str(last.get("content") or "").strip()


def _replied(chats: list[dict]) -> tuple[list[dict], int]:
    """The chats whose reply is not empty, and how many were: trained on, an empty reply teaches
    the model to stop before it answers."""
    replied = [chat for chat in chats if not _empty_reply(chat)]
    empty = len(chats) - len(replied)
    if empty:
        log.warning("%d of %d training chats have an empty reply: left out", empty, len(chats))
    if not replied:
        raise ValueError("no training examples" + (f" with a reply ({empty} empty ones left out)" if empty else "")
                         + ": nothing to fine-tune on")
    return replied, empty


def _write_record(out_dir: Path, base_id: str, recipe, report, data_path: Path, chats: int, empty: int,
                  validation: int, adapter: Path) -> None:
    """training.json (recipe, figures, what was trained on, the adapter) and curve.json."""
    record = {"base_sha256": base_id, "recipe": recipe.to_dict(), "report": report.to_dict(),
              "train_data": {"file": data_path.name, "chats": chats, "empty_replies_skipped": empty,
                             "sha256": sha256_of(data_path)},
              "validation_chats": validation,
              "adapter_weights": "best point" if report.best else "last step",
              "adapter": {"file": adapter.name, "bytes": adapter.stat().st_size, "sha256": sha256_of(adapter)},
              "losses": [round(x, 4) for x in report.losses]}
    (out_dir / "training.json").write_text(json.dumps(record, indent=2))
    (out_dir / "curve.json").write_text(json.dumps({"curve": report.curve, "best": report.best}, indent=2))


def train_adapter(chats: list[dict], out_dir: str | Path, recipe, *, budget_s: float | None = None,
                  progress: bool = True, base=None, validation: list[dict] | None = None,
                  validate_every: int | None = None, device: str = "auto") -> tuple[Path, Any]:
    """Train a LoRA adapter on chat examples and write it as `out_dir/adapter.gguf`, beside
    `train-data.jsonl` (what it was trained on) and `training.json` (recipe and figures).

    Args:
        chats: `{"messages": [...]}` each, the last message the assistant's reply.
        out_dir: the run folder; a rerun with the same chats and recipe resumes its checkpoint.
        recipe: a `LoraRecipe`.
        budget_s: stop when this many seconds are spent; the adapter holds what was learned.
            Ctrl-C or SIGTERM stops the same way, then raises KeyboardInterrupt once the
            adapter and its record are written, so a caller does not go on half-trained.
        base: (tokenizer, model) to train instead of the embedded GGUF (tests pass a tiny one),
            with `base_id` and `architecture` attributes on the model if not the embedded one.
        validation: held-out chats; their loss is measured every `validate_every` examples and at
            the end (`curve.json`), and the adapter holds the best point's weights.
        device: "cpu", "cuda" or "auto" (cuda where torch sees one); logged.
    """
    # late: the LM door is read at call time, where tests replace its base hash (a circle too)
    from treeqa.lm import base_model_sha256

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    chats, empty = _replied(chats)
    data_path = out_dir / "train-data.jsonl"
    data_path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chats), encoding="utf-8")
    if base is None:
        # late: tests replace treeqa.lm._engine.unload_local_engines, so it is read at call time
        from treeqa.lm._engine import unload_local_engines

        if unload_local_engines():  # the engine's ~1.9 GB go to the trainer; its next call reloads it
            log.info("embedded engine unloaded for the training")
        release_freed_memory()  # and what a bootstrapping before it (`optimize`) left in the heap
    tokenizer, model = base if base is not None else load_base(training_device(device))
    base_id = getattr(model, "base_id", None) or base_model_sha256()
    examples = [chat_tokens(tokenizer, chat["messages"]) for chat in chats]
    held_out = [chat_tokens(tokenizer, chat["messages"]) for chat in validation or []]
    trainer = LoraTrainer(model, tokenizer, recipe, base_id=base_id, work_dir=out_dir,
                          cache_dir=get_settings().cache_dir / "lora-layers")
    report = trainer.train(examples, budget_s=budget_s, progress=progress, validation=held_out,
                           validate_every=validate_every)
    weights = trainer.best_lora_state()  # a stop by the budget was validated too: the best point so far
    adapter = write_adapter(weights, out_dir / "adapter.gguf", alpha=recipe.alpha,
                            architecture=getattr(model, "architecture", None) or "qwen2")
    _write_record(out_dir, base_id, recipe, report, data_path, len(chats), empty, len(held_out), adapter)
    del trainer
    if base is None:
        del model
        gc.collect()
    if report.interrupted:  # checkpointed and its best point written: the caller stops too (`optimize`)
        raise KeyboardInterrupt
    return adapter, report
