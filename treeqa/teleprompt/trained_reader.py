"""`--optimizer trained-reader`: the program's reader reads in rta's prompt through a LoRA adapter
trained on rta's reads of every question we may train on (`treeqa.train.reader`).

Why: the first compiled program clearly better than one retrieval is ToR's search read this way
(HotpotQA 197: 40.1 EM, +9.1 [+3.1, +15.2] over rta). This compiler makes that one step of a
compile (the default of ToR, after the path judge and the released settings, and of the beam): it sets the reading the
program declares (`trained_reading`: ToR `fusion=passages`, the beam `reading=passages`, rta as it
is), leaves that reader zero-shot (the prompt the adapter was trained in), and puts the adapter on
it. The adapter is the released reader (`treeqa.train.released`) when its record matches what this
compile would train, `--reader train` trains one inside the run folder (hours; resumable), and on
an endpoint the reader's predictor asks the model the user serves the adapter under
(`--reader-model`). No LM call is made: the reads come from retrieval and the data's answers.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt.teleprompt import Teleprompter

import treeqa.lm  # get_lm and the base model's hash are looked up at each call (tests replace them)
from treeqa.lm.provider import EmbeddedLM
from treeqa.programs.compiled import attach_adapter
from treeqa.programs.compiled.yes_no import calibrate_yes_no
from treeqa.settings import get_settings
from treeqa.teleprompt.base import CompileContext, Compiler, register
from treeqa.teleprompt.released_settings import rebuilt_with
from treeqa.train.reader import ReaderRecipe, train_reader
from treeqa.train.reads import set_settings
from treeqa.train.released import differences, released_reader

log = logging.getLogger(__name__)

READERS = ("released", "train", "none")
# `--reader train` end to end when no measured figure is at hand: the released reader's own
# training took about this long on a 2-core AVX-512 EPYC (reads built, then 1,073 examples)
TRAIN_SECONDS_GUESS = 6000.0


def with_trained_reading(student: dspy.Module) -> dspy.Module:
    """The student rebuilt with the reading its class declares (`trained_reading`), its fitted
    settings and every predictor's state kept but the reader's, which starts zero-shot: the
    adapter was trained in the reader's bare prompt."""
    cls = type(student)
    return rebuilt_with(student, cls.trained_reading or {}, fresh=(cls.reader,))


def reads_settings_wanted(recipe) -> dict[str, Any]:
    """The manifest settings the compile's reads would have, as JSON reads them back."""
    return json.loads(json.dumps(set_settings(**recipe.reads_settings())))


def obtain_reader(mode: str, out_dir: Path | None, *, say=log.info) -> tuple[Path, dict[str, Any], str]:
    """(adapter file, its record, how it was obtained): the released reader where its record
    matches this compile's reads, recipe and base model, or (`mode="train"`) one trained in
    `out_dir/reader`. A mismatch is an error that names what differs."""
    recipe = ReaderRecipe()
    if mode == "released":
        released = released_reader()
        differ = differences(released, recipe, treeqa.lm.base_model_sha256(), reads_settings_wanted(recipe))
        if differ:
            raise ValueError("the released reader does not fit this compile (" + "; ".join(differ[:4])
                             + "): --reader train trains one for it (hours on 2 cores), --reader none keeps "
                             "the paper's reader")
        say(f"trained reader: the released one (reads {released.reads_sha256[:12]}…, "
            f"{released.record['reads']['train_reads']} train reads)")
        return released.adapter, released.record, "released"
    if out_dir is None:
        raise ValueError("--reader train needs the run's folder to train in")
    record = train_reader(Path(out_dir) / "reader", budget_s=get_settings().finetune_budget_s, say=say)
    return Path(out_dir) / "reader" / record["adapter"]["file"], record, "trained in this run"


def reader_fit(record: dict[str, Any], how: str, reading: dict, predictor: str, served_as: str | None) -> dict:
    """What compiled.json records of the trained reader: how it came, what it was trained on, and
    the validation figures the checkpoint was chosen by."""
    training = record.get("training") or {}
    return {"reader": how, "predictor": predictor, "reading": dict(reading),
            "adapter_sha256": record["adapter"]["sha256"], "reads_sha256": record["reads"]["sha256"],
            "train_reads": record["reads"].get("train_reads"),
            "validation_reads": record["reads"].get("validation_reads"),
            "recipe": record["recipe"], "best": training.get("best"),
            "validation": record.get("validation"), **({"served_as": served_as} if served_as else {})}


class TrainedReader(Teleprompter):
    """Put the trained reader on a program's reader (see the module doc).

    Args:
        reader: "released" (the shipped adapter, checked against its record) or "train".
        out_dir: the run folder (`--reader train` trains in `out_dir/reader`, resumably).
        reader_model: on an endpoint, the model name the endpoint serves the adapter under; the
            evaluations ask it in the adapter's place (`run_adapters_with`).
    """

    def __init__(self, reader: str = "released", out_dir: Path | None = None, reader_model: str | None = None,
                 dataset: str | None = None):
        super().__init__()
        if reader not in READERS[:2]:
            raise ValueError(f"--reader {reader}: the trained-reader compiler takes released or train")
        self.reader, self.out_dir, self.reader_model, self.dataset = reader, out_dir, reader_model, dataset

    def compile(self, student: dspy.Module, *, trainset=None, **kwargs) -> dspy.Module:
        cls = type(student)
        lm = dspy.settings.lm
        embedded = lm is None or isinstance(lm, EmbeddedLM)
        if not embedded and not self.reader_model:
            raise ValueError("the trained reader is a LoRA adapter: on an endpoint, serve it (its PEFT form is "
                             "beside the GGUF) and name the model with --reader-model, or compile with "
                             "--reader none")
        adapter, record, how = obtain_reader(self.reader, self.out_dir)
        program = with_trained_reading(student)
        attach_adapter(program, adapter, [cls.reader])  # the compiled file records it wherever it runs
        program.trained_reader_fit = reader_fit(record, how, cls.trained_reading or {}, cls.reader,
                                                None if embedded else self.reader_model)
        calibration = record.get("yes_no") or {}
        fit = (calibration.get("datasets") or {}).get(self.dataset)
        if fit is not None:  # the reader's yes/no prior, fitted for this dataset on its validation reads
            calibrate_yes_no(program, [cls.reader], fit["bias"])
            program.yes_no_fit = {"dataset": self.dataset, "fitted_on": calibration.get("fitted_on"),
                                  **{k: v for k, v in fit.items() if k != "bias"}}
        program._compiled = True
        return program


def _build(c: CompileContext) -> tuple[TrainedReader, dict]:
    return TrainedReader(c.spec.reader, c.out_dir, c.spec.reader_model, c.spec.dataset), {}


def _refuses(cls: type, settings: dict[str, Any]) -> str | None:
    if cls.trained_reading and "reading" in cls.trained_reading and settings.get("evidence") not in (None, "retrieval"):
        return "reads its passages through the trained reader only with evidence='retrieval'"
    return None


def _train_seconds(n_train: int, spec=None) -> float:
    """Nothing for the released reader; for `--reader train`, the released reader's measured
    seconds (reads and training), else a guess."""
    if spec is None or getattr(spec, "reader", "released") != "train":
        return 0.0
    try:
        record = released_reader().record
        return float(record["training"]["seconds"]) + float(record.get("seconds_building_reads", 0))
    except (ValueError, KeyError, TypeError):
        return TRAIN_SECONDS_GUESS


register(Compiler("trained-reader", _build, lambda per_q, n, t: 0, fits=lambda cls: cls.trained_reading is not None,
                  unfit="has no reading in rta's prompt for a trained reader (trained_reading)", refuses=_refuses,
                  train_seconds=_train_seconds, weights=True,
                  # the compile's train questions are never read: the released reader, or one trained on
                  # every question we may train on, so `--train-from` (NQ's beam from MuSiQue) keeps it
                  from_annotations=True,
                  sets=lambda cls, settings: dict(cls.trained_reading or {})))
