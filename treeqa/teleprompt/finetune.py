"""Compile the weights: DSPy's BootstrapFinetune (and BetterTogether) on the embedded model.

`--optimizer finetune` is DSPy's `BootstrapFinetune` as it ships: the program runs over the
train questions, the calls of those it answers right become training chats, and the LM's
provider trains on them. The embedded model's provider (`treeqa.lm.provider`) trains a LoRA
adapter on this CPU and the program's predictors answer through it. For a program whose reader
reads retrieved passages (rta) each train question also becomes a gold read (its gold paragraphs
among the retrieved ones, answered with the gold answer: `gold_reads`), so the reader learns
from the questions it still gets wrong. `--optimizer better-together` is DSPy's BetterTogether:
demos by random search, then the weights, then demos again.

Training costs 10-18 s an example on two cores (benchmarks/lora_train.md): `--plan`
prices it, and `TREEQA_FINETUNE_BUDGET_S` caps it (the adapter then holds what was learned).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path

import dspy
from dspy.teleprompt import BetterTogether, BootstrapFewShotWithRandomSearch, BootstrapFinetune

from treeqa.lm.lora import LoraRecipe, native_bf16
from treeqa.lm.provider import EmbeddedLM
from treeqa.settings import get_settings
from treeqa.teleprompt.base import CompileContext, Compiler, register
from treeqa.teleprompt.metrics import em_metric
from treeqa.train.gold_reads import gold_reads

log = logging.getLogger(__name__)

# ~820-token reads, LoRA on the top 8 layers, one epoch, on 2 cores: 10.2-17.6 s an example on the
# AVX-512 and AMX machines (28.8 s on the first, an AVX2 EPYC; benchmarks/lora_train.md); the
# slowest of the recent ones is the price for --plan, not a promise
SECONDS_PER_EXAMPLE = 18.0
# the one recipe's defaults (`LoraRecipe`: what the recipe comparison chose)
DEFAULT_RECIPE = {key: getattr(LoraRecipe(), key) for key in ("rank", "alpha", "top_layers", "learning_rate",
                                                              "accumulate")}
# BetterTogether chooses among its steps on a held-out share of train only from this many questions up
MIN_HELD_OUT = 10


def fast_dtypes() -> dict:
    """bfloat16 for the lower pass and the trained layers where the CPU computes it natively: the
    lower layers then also take half the memory beside the loaded engine (12.7 GB in float32)."""
    if not native_bf16():
        return {}
    log.info("LoRA in bfloat16 (the lower pass and the trained layers): this CPU has native BF16")
    return {"lower_dtype": "bfloat16", "top_dtype": "bfloat16"}


class Finetune(BootstrapFinetune):
    """BootstrapFinetune for the embedded model, with gold reads added where the program's
    reader reads retrieved passages.

    Args:
        metric: EM, deciding which traces are kept.
        out_dir: the training's folder (data record, checkpoints, adapter); resumed on a rerun.
        recipe: `LoraRecipe` fields.
        gold: add gold reads for a retrieve-then-read program.
        budget_s: stop the training after this many seconds.
    """

    def __init__(self, metric, out_dir: Path | None = None, recipe: dict | None = None, gold: bool = True,
                 budget_s: float | None = None):
        super().__init__(metric=metric, multitask=True, num_threads=1)
        self.out_dir, self.gold, self.budget_s = out_dir, gold, budget_s
        self.recipe = dict(recipe or {**DEFAULT_RECIPE, **fast_dtypes()})

    def compile(self, student: dspy.Module, trainset, teacher=None, **kwargs) -> dspy.Module:
        on_the_embedded_model(student, "finetune")
        extra, skipped = self._gold_reads(student, trainset)
        train = {"recipe": self.recipe, "extra_data": extra, "budget_s": self.budget_s}
        if self.out_dir is not None:
            train["out_dir"] = str(Path(self.out_dir) / "finetune")
        self.train_kwargs = defaultdict(lambda: train)
        compiled = super().compile(student, trainset=list(trainset), teacher=teacher)
        for program in (student, compiled, *(teacher if isinstance(teacher, list) else [teacher])):
            unpin_forward(program)
        compiled.finetune_fit = self._fit(len(extra), skipped)
        return compiled

    def _gold_reads(self, program: dspy.Module, trainset) -> tuple[list[dict], int]:
        if not self.gold or not hasattr(program, "k") or not hasattr(program, "retriever"):
            return [], 0
        return gold_reads(program, trainset, dspy.settings.adapter or dspy.ChatAdapter())

    def _fit(self, gold: int, skipped: int) -> dict:
        fit = {"gold_reads": gold, "gold_skipped": skipped, "recipe": self.recipe}
        record = Path(self.out_dir) / "finetune" / "training.json" if self.out_dir is not None else None
        if record is not None and record.is_file():
            trained = json.loads(record.read_text())
            fit.update(chats=trained["train_data"]["chats"], traces=trained["train_data"]["chats"] - gold,
                       report=trained["report"], adapter=trained["adapter"])
        return fit


def unpin_forward(program: dspy.Module | None) -> None:
    """Drop the `forward` that DSPy's `bootstrap_trace_data` leaves on the program it traced: it
    "restores" the method as an instance attribute bound to that program. A program holding the
    embedded engine cannot be deep-copied whole, so DSPy copies it attribute by attribute, and
    that bound method then makes every later copy (the next teleprompter's candidates, a reset
    copy) run the original program, whatever demos the copy holds."""
    if program is not None and getattr(vars(program).get("forward"), "__self__", None) is program:
        del program.forward


def on_the_embedded_model(student: dspy.Module, optimizer: str) -> None:
    """Refuse an LM that cannot be trained here, before any question is asked; give every
    predictor without an LM the task LM (DSPy's weight optimizers train per predictor's LM)."""
    lm = dspy.settings.lm
    if not isinstance(lm, EmbeddedLM):
        raise ValueError(f"--optimizer {optimizer} trains a LoRA adapter of the embedded model: run it with --lm local")
    for _, predictor in student.named_predictors():
        predictor.lm = predictor.lm or lm


class Together(BetterTogether):
    """DSPy's BetterTogether, on the embedded model: the student's predictors answer through the
    task LM from the start (BetterTogether refuses a predictor without one), an endpoint is
    refused before the prompt step's hours, not after them, and a failed step fails the compile."""

    def compile(self, student: dspy.Module, **kwargs) -> dspy.Module:
        on_the_embedded_model(student, "better-together")
        held_out = _held_out_share(kwargs)
        compiled = super().compile(student, **kwargs)
        if compiled.flag_compilation_error_occurred:  # DSPy logs the step's error and returns the best so far
            raise RuntimeError("--optimizer better-together: a step failed (its error and traceback are logged "
                               "above); the compile stops rather than save a program short of its strategy")
        # which step's program it returns (the last, or the best on its held-out share of train), and each one's score
        candidates = compiled.candidate_programs
        chosen = next((c["strategy"] for c in candidates if c["program"] is compiled), "")
        compiled.together_fit = {"chosen": chosen or "none", "held_out": held_out,
                                 "scores": {c["strategy"] or "none": c["score"] for c in candidates}}
        return compiled


def _held_out_share(kwargs: dict) -> int:
    """How many train questions BetterTogether holds out to choose a step on; under
    `MIN_HELD_OUT` none (`valset_ratio` 0, the last step kept): on a handful of questions the
    choice is noise, and a tie hands it to the untouched program, throwing the adapter away."""
    if kwargs.get("valset"):
        return len(kwargs["valset"])
    n = int(kwargs.get("valset_ratio", 0.1) * len(kwargs.get("trainset") or ()))
    if 0 < n < MIN_HELD_OUT:
        log.warning("better-together: %d held-out questions are too few to choose a step on (%d or more); "
                    "the program of the last step is kept", n, MIN_HELD_OUT)
        kwargs["valset_ratio"], n = 0, 0
    return n


def _finetune(c: CompileContext) -> tuple[Finetune, dict]:
    return Finetune(em_metric, out_dir=c.out_dir, budget_s=get_settings().finetune_budget_s), {}


def _better_together(c: CompileContext) -> tuple[Together, dict]:
    prompts = BootstrapFewShotWithRandomSearch(metric=em_metric, max_bootstrapped_demos=c.spec.max_demos,
                                               max_labeled_demos=0, num_candidate_programs=c.tuning["candidates"],
                                               num_threads=c.spec.threads, max_errors=10_000)
    weights = Finetune(em_metric, out_dir=c.out_dir, budget_s=get_settings().finetune_budget_s)
    return Together(metric=em_metric, p=prompts, w=weights), {"strategy": "p -> w -> p", "seed": c.spec.seed}


def training_seconds(n_train: int, spec=None, gold: bool = True) -> float:
    """The price of training on `n_train` questions' traces (and as many gold reads)."""
    return n_train * (2 if gold else 1) * SECONDS_PER_EXAMPLE


register(Compiler("finetune", _finetune, lambda per_q, n, t: n * per_q, train_seconds=training_seconds,
                  weights=True))
register(Compiler("better-together", _better_together,
                  lambda per_q, n, t: n * per_q + 2 * n * (t["candidates"] + 4) * per_q + n * per_q,
                  train_seconds=training_seconds))
