"""The trained reader in one call: every question we may train on, read in rta's prompt, a LoRA
adapter trained on those reads, and a record that says what went in (`reader.json`).

Why one road: the reader that made the compiled ToR better than one retrieval came out of three
commands with a dozen flags found in notes. `train_reader` is those commands with the choices the
validation reads of training questions made (`ReaderRecipe`): the reads of the v5 set (own, missed,
gold and partial reads, one a question, every built read of a yes/no question), yes/no balanced
within each dataset and question template, and the one LoRA recipe. The trained-reader compiler
calls it, and so did the training of the released reader (`treeqa.train.released`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treeqa.lm.adapter import sha256_of
from treeqa.lm.lora import LoraRecipe, native_bf16
from treeqa.lm.provider import train_adapter
from treeqa.train.chats import train_and_validation_reads
from treeqa.train.reads import build_reader_set
from treeqa.train.yes_no import fit_adapter_yes_no

READ_MIX = {"own": 0.4, "missed": 0.4, "gold": 0.4, "partial": 0.2}
# the recipe's fields that change what is learned; the dtypes only change how fast (and are
# chosen by the CPU: bfloat16 where it is native), so a record matches across them
LEARNED = ("rank", "alpha", "top_layers", "targets", "learning_rate", "epochs", "accumulate", "max_tokens", "seed")


@dataclass(frozen=True)
class ReaderRecipe:
    """What the reader is trained on and how.

    Args:
        mix: weights by read kind for each question's one read (`treeqa.train.reads.picked`).
        partial_share: share of multi-gold questions that also get a read with a gold left out.
        yes_no_by_template: yes/no balanced within each dataset and question template, not over
            the dataset only (2Wiki's comparisons: `treeqa.train.reads.question_template`).
        per_question: train reads a question.
        yes_no_built: also every built read of a yes/no question.
        validation_reads: held-out reads whose loss is measured at each point (the best is kept).
        validate_every: examples between validation points.
        lora: the LoRA recipe (its dtypes are chosen for the CPU when training starts).
    """

    mix: dict[str, float] = field(default_factory=lambda: dict(READ_MIX))
    partial_share: float = 1.0
    yes_no_by_template: bool = True
    per_question: int = 1
    yes_no_built: bool = True
    validation_reads: int = 64
    validate_every: int = 256
    lora: LoraRecipe = field(default_factory=LoraRecipe)

    def reads_settings(self) -> dict[str, Any]:
        """The keyword arguments of `build_reader_set` this recipe builds with."""
        return {"mix": dict(self.mix), "partial_share": self.partial_share, "yes_no_by_dataset": True,
                "yes_no_by_template": self.yes_no_by_template}

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "lora"}
        return {**out, "mix": dict(self.mix), "lora": self.lora.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReaderRecipe:
        lora = dict(data.get("lora") or {})
        if "targets" in lora:
            lora["targets"] = tuple(lora["targets"])
        return cls(**{k: v for k, v in data.items() if k != "lora"}, lora=LoraRecipe(**lora))

    def for_this_cpu(self) -> ReaderRecipe:
        """The recipe with bfloat16 for the lower pass and the trained layers where the CPU computes
        it natively (half the time: benchmarks/lora_train.md)."""
        if not native_bf16():
            return self
        return dataclasses.replace(self, lora=dataclasses.replace(self.lora, lower_dtype="bfloat16",
                                                                  top_dtype="bfloat16"))


def learned_part(recipe: dict[str, Any]) -> dict[str, Any]:
    """A recorded recipe's part that decides what is learned: everything but the LoRA dtypes."""
    lora = recipe.get("lora") or {}
    return {**{k: v for k, v in recipe.items() if k != "lora"},
            "lora": {k: list(v) if isinstance(v, tuple) else v for k, v in lora.items() if k in LEARNED}}


def recipe_differences(recorded: dict[str, Any], wanted: ReaderRecipe) -> list[str]:
    """The learned settings in which a recorded recipe differs from `wanted`, as 'name: a != b'."""
    found, asked = learned_part(recorded), learned_part(wanted.to_dict())
    out = [f"{k}: {found.get(k)!r} != {asked[k]!r}" for k in asked if k != "lora" and found.get(k) != asked[k]]
    out += [f"lora.{k}: {found['lora'].get(k)!r} != {v!r}" for k, v in asked["lora"].items()
            if found["lora"].get(k) != v]
    return out


def build_reads(out: Path, recipe: ReaderRecipe, *, build: Callable[..., dict] | None = None,
                say: Callable[[str], None] = print) -> dict:
    """The reads in `out` (reads.jsonl, manifest.json): built from every question we may train on,
    or kept where a set built with the same settings is already there (a resumed compile).
    Returns the manifest."""
    manifest_file = out / "manifest.json"
    wanted = recipe.reads_settings()
    if manifest_file.is_file() and (out / "reads.jsonl").is_file():
        manifest = json.loads(manifest_file.read_text())
        settings = manifest.get("settings", {})
        if all(settings.get(k, False) == v for k, v in wanted.items()):
            if sha256_of(out / "reads.jsonl") == manifest.get("reads_sha256"):
                say(f"reads: kept the set in {out} ({manifest['counts']['train_reads']} train reads)")
                return manifest
    say(f"reads: building the reader's training set into {out} (every question we may train on; "
        "the first build embeds three datasets' corpora: minutes)")
    return (build or build_reader_set)(out, **wanted)


def train_reader(out: Path, recipe: ReaderRecipe | None = None, *, budget_s: float | None = None,
                 device: str = "auto", progress: bool = True, build: Callable[..., dict] | None = None,
                 train: Callable[..., tuple[Path, Any]] | None = None,
                 fit_yes_no: Callable[..., dict[str, Any] | None] | None = None,
                 say: Callable[[str], None] = print) -> dict[str, Any]:
    """Build the reads into `out/reads`, train the adapter in `out/lora` (a rerun resumes its
    checkpoint) and write `out/reader.json`: the recipe, the reads' sha256 and counts, the base
    model's sha256, the adapter's file and sha256, the curve and the best point, the seconds, and
    the reader's yes/no calibration fitted on the validation reads (`treeqa.train.yes_no`; a
    rerun resumes it). `build`, `train` and `fit_yes_no` stand in for `build_reader_set`,
    `train_adapter` and `fit_adapter_yes_no` (tests). Returns the record."""
    recipe = (recipe or ReaderRecipe()).for_this_cpu()
    out = Path(out)
    started = time.perf_counter()
    manifest = build_reads(out / "reads", recipe, build=build, say=say)
    reads_seconds = time.perf_counter() - started
    train_reads, held_out = train_and_validation_reads([out / "reads"], recipe.per_question, recipe.yes_no_built)
    chats = [r["chat"] for r in train_reads]
    validation = [r["chat"] for r in held_out[: recipe.validation_reads]]
    say(f"training the reader on {len(chats)} reads, validating on {len(validation)} "
        f"(LoRA: {recipe.lora.top_layers} layers, rank {recipe.lora.rank}, lr {recipe.lora.learning_rate}, "
        f"{recipe.lora.lower_dtype}); a rerun resumes from {out / 'lora'}")
    adapter, report = (train or train_adapter)(chats, out / "lora", recipe.lora, budget_s=budget_s, progress=progress,
                            validation=validation, validate_every=recipe.validate_every, device=device)
    trained = json.loads((out / "lora" / "training.json").read_text())
    summary = report.to_dict()
    record = {
        "recipe": recipe.to_dict(),
        "reads": {"sha256": manifest["reads_sha256"], "counts": manifest["counts"],
                  "settings": manifest.get("settings", {}), "train_reads": len(chats),
                  "validation_reads": len(validation)},
        "base_sha256": trained["base_sha256"],
        "adapter": {"file": str(Path("lora") / Path(adapter).name), "bytes": Path(adapter).stat().st_size,
                    "sha256": sha256_of(adapter)},
        "training": {k: summary.get(k) for k in ("examples", "steps_done", "steps_total", "best", "curve",
                                                 "seconds", "peak_rss_gb", "finished", "device")
                     if k in summary},
        "seconds_building_reads": round(reads_seconds, 1),
    }
    say("fitting the reader's yes/no calibration on the validation reads of yes/no questions")
    record["yes_no"] = (fit_yes_no or fit_adapter_yes_no)(Path(adapter), out / "reads", out, progress=progress)
    (out / "reader.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
