"""What one optimize run is: its spec (checked whole before anything runs, the program
resolved once), the compilers it names in order, its splits and its plan of LM calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import dspy
from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from treeqa.data import DEFAULT_DATASET, EVAL_SPLITS, SPLITS
from treeqa.data.sample_ids import ids_sha256
from treeqa.evaluation.runs import (
    RUNS_DIR,
    EvalSpec,
    check_spec_names,
)
from treeqa.programs import DEFAULT_PROGRAM, PROGRAMS, ProgramSpec, resolve_program
from treeqa.retrievers import DEFAULT_KIND
from treeqa.retrievers.gold import GoldRetriever
from treeqa.settings import without_userinfo
from treeqa.teleprompt import CompileContext, compilers


def optimizer_names() -> tuple[str, ...]:
    """Every `--optimizer`, as the compiler registry (`treeqa.teleprompt`) has them."""
    return tuple(compilers())


def fitting_optimizers(program_class: type) -> tuple[str, ...]:
    """The `--optimizer`s that can compile `program_class` (each compiler's `fits`)."""
    return tuple(name for name, c in compilers().items() if c.fits(program_class))


def preparers() -> tuple[str, ...]:
    """Compilers that prepare a program from annotations or settings: an EM teleprompter can
    run on what one of them made (`--optimizer path-judge+reader`)."""
    return tuple(name for name, c in compilers().items() if c.preparer)


def stages(optimizer: str) -> list[str]:
    """The compilers `--optimizer` names, in order: a preparer, a weight training and an EM
    teleprompter, each at most once and in that order (e.g. path-judge+finetune+reader); a
    preparer that only sets settings (`settings_only`) may follow another preparer
    (path-judge+released-settings+trained-reader)."""
    names, known, ready = optimizer.split("+"), optimizer_names(), preparers()
    if any(n not in known for n in names) or len(names) > 4 or len(set(names)) != len(names):
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(known)}, or a preparer "
                         f"({', '.join(ready)}) then another, joined by '+' (e.g. path-judge+reader)")
    ranks = [0 if n in ready else 1 if compilers()[n].weights else 2 for n in names]
    if any(b < a or (b == a and not (b == 0 and compilers()[n].settings_only))
           for a, b, n in zip(ranks, ranks[1:], names[1:], strict=False)):
        raise ValueError(f"--optimizer {optimizer}: a preparer ({', '.join(ready)}), then a weight training "
                         "(finetune), then an EM teleprompter, each at most once and in that order "
                         "(e.g. path-judge+reader, annotated+mipro, path-judge+finetune+reader)")
    return names


# --- splits -------------------------------------------------------------------------------

def splits_for(dataset: str) -> tuple[str, str]:
    """(train split, evaluation split): evaluate on the split the papers report
    (`EVAL_SPLITS`), compile on train, else on the remaining split (NQ/TriviaQA: dev)."""
    if dataset not in SPLITS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(SPLITS)}")
    evaluate_on = EVAL_SPLITS[dataset]
    train = "train" if "train" in SPLITS[dataset] else next(s for s in SPLITS[dataset] if s != evaluate_on)
    return train, evaluate_on


# --- the plan: an upper bound on LM calls ----------------------------------------------

def max_calls_per_question(program: dspy.Module) -> int:
    """The most LM calls one question can take with this program (no DSPy retries counted)."""
    return type(program).call_bound(program.settings)


def compile_call_bound(optimizer: str, per_q: int, n_train: int, settings: dict[str, int]) -> int:
    """The most LM calls the compilers of `optimizer` make, roughly bounded (their declarations)."""
    return sum(compilers()[name].call_bound(per_q, n_train, settings) for name in stages(optimizer))


class OptimizeSpec(BaseModel):
    """One optimize run: what to compile, how, and where it is evaluated."""

    program: str = DEFAULT_PROGRAM
    dataset: str = DEFAULT_DATASET
    # None (what the command line passes when not told): the program's own default compile and
    # its train size, or 20 train questions for another optimizer (`default_compile_note` says so)
    optimizer: str | None = "bootstrap"
    train_from: str | None = None  # compile on this dataset's train split (annotation-only compilers)
    train: int | None = Field(20, ge=1)
    dev: int = Field(20, ge=1)  # `make demo` (ToR, 20 dev questions) takes about 15 minutes on 2 cores
    seed: int = 0
    skip: int = Field(0, ge=0)  # dev questions left out at the start of the seeded order (already examined)
    ids: list[str] | None = None  # exactly these dev questions, in order (--sample/--ids), not a seeded draw
    sample: str | None = None  # the committed sample `ids` come from, by name
    train_ids: list[str] | None = None  # exactly these train questions (--train-sample/--train-ids)
    train_sample: str | None = None
    lm: str = "local"
    api_base: str | None = None
    teacher_lm: str | None = None
    retriever: str = DEFAULT_KIND
    corpus: str | None = None  # a registered corpus of your own, searched instead of the dataset's
    threads: int = Field(1, ge=1)
    preset: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    max_demos: int = Field(2, ge=0)
    candidates: int = Field(2, ge=1)
    trials: int = Field(3, ge=1)
    metric_calls: int = Field(40, ge=1)
    annotated_demos: int = Field(3, ge=1)  # demos per predictor for --optimizer annotated (the papers' 3)
    cache: bool = True  # DSPy's response cache for the two evaluations (compiling always uses it)
    zero_shot_from: str | None = None  # a finished run of the same zero-shot spec to start from
    replay_from: str | None = None  # a ToR run whose recorded searches the compiled side reads (evaluation.replay)
    zero_shot: bool = True  # False: the compiled side alone (its baseline measured elsewhere); a later run may add it
    # the trained reader (`--optimizer trained-reader`, in ToR's and the beam's default compile): the
    # released adapter, one trained in this run, or none (the default compile then keeps the paper's reader)
    reader: Literal["released", "train", "none"] = "released"
    reader_model: str | None = None  # on an endpoint: the model name it serves the trained reader's adapter under
    # a program run zero-shot on the same questions too, each side paired with it (`make demo`: rta)
    against: str | None = None
    # a compiled file the compile starts from (`--from`): its stages run on that program, not a zero-shot one
    start_from: str | None = None
    # `--optimizer settings`: keep only settings at most this many times rta's seconds a question
    max_cost_ratio: float | None = Field(None, gt=0)

    _resolved: ProgramSpec | None = PrivateAttr(default=None)
    _default_note: str | None = PrivateAttr(default=None)

    @field_validator("api_base")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        """Written to spec.json and report.json: a URL's `user:secret@` stays in this process alone."""
        return without_userinfo(url)

    @model_validator(mode="after")
    def _known_names(self) -> OptimizeSpec:
        """Unknown names and bad settings fail before any folder is made or any LM is called;
        the program is resolved once, here (`resolved`)."""
        self._resolved = resolve_program(self.program, self.params, self.preset)
        self._sizes_from_ids()
        self._default_compile()
        names = stages(self.optimizer)
        check_spec_names(self.dataset, None, self.retriever)
        if self.against is not None:
            resolve_program(self.against, {}, None)  # an unknown name is an error now, not after the compile
        if self.retriever == GoldRetriever.kind:
            raise ValueError("--retriever gold hands each question its own gold paragraphs: it measures reading "
                             "alone (`treeqa evaluate`); a program compiled on it would learn from paragraphs no "
                             "search found. Compile with dense or bm25.")
        if self.train_from is not None:
            splits_for(self.train_from)  # an unknown dataset is an error here
            searching = [n for n in names if not compilers()[n].from_annotations]
            if searching:
                able = ", ".join(n for n, c in compilers().items() if c.from_annotations)
                raise ValueError(f"--train-from {self.train_from}: {', '.join(searching)} runs the program on the "
                                 f"train questions, over the {self.dataset} corpus that does not hold their "
                                 "paragraphs; only compilers that learn from the annotations alone can train on "
                                 f"another dataset ({able})")
        self._check_compilers(names)
        if self.max_cost_ratio is not None and "settings" not in names:
            raise ValueError("--max-cost-ratio prices the settings search: add --optimizer settings "
                             "(e.g. settings+trained-reader)")
        return self

    def _sizes_from_ids(self) -> None:
        """Questions given by id set the sizes (train, dev): a size that says otherwise is refused."""
        for ids, size, option in ((self.ids, "dev", "--dev"), (self.train_ids, "train", "--train")):
            if ids is None:
                continue
            if not ids or len(set(ids)) != len(ids):
                raise ValueError(f"{option} ids must name at least one question, each once")
            if size == "train" and self.train is None:
                self.train = len(ids)
            if getattr(self, size) != len(ids):
                raise ValueError(f"{option} {getattr(self, size)} but {len(ids)} ids are given: a sample by ids "
                                 "asks them all")

    @property
    def id_hashes(self) -> dict[str, str]:
        """The sha256 of each side's ids, for the sides given by id (what the run's key holds)."""
        return {f"{side}_sha256": ids_sha256(ids) for side, ids in (("ids", self.ids), ("train_ids", self.train_ids))
                if ids is not None}

    def _default_compile(self) -> None:
        """An optimizer or train size left unset (None) takes the program's own default compile
        (e.g. ToR: path-judge on 100) or, for another optimizer, 20 train questions, and says so."""
        default = dict(self._resolved.cls.default_compile)
        if self.reader == "none":  # the paper's reader, and the paper's search: the released settings were
            # chosen for the trained reader, so the default compile keeps neither
            default["optimizer"] = "+".join(n for n in default["optimizer"].split("+")
                                            if n not in ("trained-reader", "released-settings"))
            if self.optimizer and "trained-reader" in self.optimizer.split("+"):
                raise ValueError(f"--reader none with --optimizer {self.optimizer}: the trained-reader step "
                                 "needs a reader (released or train)")
        if self.train is None:
            self.train = default["train"] if self.optimizer in (None, default["optimizer"]) else 20
            if self.train != default["train"]:
                self._default_note = (f"--train not given: {self.train} train questions, the size for --optimizer "
                                      f"{self.optimizer} ({self.program}'s own compile, {default['optimizer']}, "
                                      f"uses {default['train']})")
        self.optimizer = self.optimizer or default["optimizer"]

    @property
    def default_compile_note(self) -> str | None:
        """What the default-compile rule chose where the train size was not given, when it is not
        the program's own size (None otherwise)."""
        return self._default_note

    @property
    def resolved(self) -> ProgramSpec:
        """The program compiled, with its settings resolved (see `resolve_program`)."""
        return self._resolved

    def _check_compilers(self, names: list[str]) -> None:
        """Each compiler named must fit the program and accept its settings."""
        for name in names:
            compiler = compilers()[name]
            if not compiler.fits(self.resolved.cls):
                fitting = [p for p, cls in PROGRAMS.items() if compiler.fits(cls)]
                raise ValueError(f"--optimizer {self.optimizer}: {self.program} {compiler.unfit} "
                                 f"(programs it fits: {', '.join(fitting) or 'none'})")
            reason = compiler.refuses(self.resolved.cls, self.resolved.settings)
            if reason:
                preset = f" --preset {self.preset}" if self.preset else ""
                raise ValueError(f"--optimizer {self.optimizer}: {self.program}{preset} {reason}")

    def eval_spec(self, side: str | None = None) -> EvalSpec:
        """The evaluation of the program on the dev questions: of one side of this run ('compiled'
        or 'zero-shot'), or (None) a run of its own, as a reference run a zero-shot side adopts."""
        _, dev_split = splits_for(self.dataset)
        seed = self.seed if self.ids is None else 0  # by id, the seed seeds the compile alone
        return EvalSpec(program=self.program, dataset=self.dataset, split=dev_split, n=self.dev, seed=seed,
                        skip=self.skip, ids=self.ids, sample=self.sample, lm=self.lm, api_base=self.api_base,
                        reader_model=self.reader_model,
                        retriever=self.retriever, corpus=self.corpus, preset=self.preset,
                        params=self.params, threads=self.threads, cache=self.cache, side=side)

    def default_out(self) -> Path:
        label = self.program + (f"-{self.preset}" if self.preset else "")
        exclude = ({"threads", "api_base", "cache", "zero_shot_from", "replay_from", "zero_shot"}
                   | ({"skip"} if not self.skip else set())
                   | ({"train_from"} if self.train_from is None else set())
                   | ({"max_cost_ratio"} if self.max_cost_ratio is None else set())  # earlier folders' keys kept
                   | {"ids", "sample", "train_ids", "train_sample"})  # the ids by their hashes, when given
        decisive = {**self.model_dump(exclude=exclude), **self.id_hashes}
        key = EvalSpec(program=self.program, params={**self.params, "_opt": decisive}).key()
        return RUNS_DIR / "optimize" / f"{self.dataset}-{label}-{self.optimizer}-{key}"

    def tuning(self) -> dict[str, int]:
        return {"candidates": self.candidates, "trials": self.trials, "breadth": max(2, self.candidates),
                "depth": 1, "steps": 2, "bsize": min(4, self.train), "metric_calls": self.metric_calls,
                "priced": int(self.max_cost_ratio is not None)}  # the settings search times rta too (one call)


def make_teleprompter(spec: OptimizeSpec, task_lm: dspy.LM, teacher_lm: dspy.LM | None, name: str | None = None,
                      out_dir: Path | None = None):
    """The teleprompter `name` (default: the spec's one optimizer) and its compile() keyword
    arguments, as its compiler declares them; `out_dir` keeps what a compile records."""
    name = name or spec.optimizer
    if name not in compilers():
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(optimizer_names())}")
    return compilers()[name].build(CompileContext(spec, task_lm, teacher_lm, out_dir))


def compiled_call_bound(spec: OptimizeSpec) -> int:
    """The most LM calls a question of the compiled program takes: the zero-shot settings with
    what each stage is known to set before it runs (a judge, a released search, a reading)."""
    resolved = spec.resolved
    settings = dict(resolved.settings)
    for name in stages(spec.optimizer):
        sets = compilers()[name].sets
        if sets is not None and compilers()[name].fits(resolved.cls):
            settings.update(sets(resolved.cls, settings))
    return resolved.cls.call_bound(settings)


def plan(spec: OptimizeSpec) -> dict[str, int]:
    """The LM-call budget of a run, from the settings alone (no index, no model)."""
    per_q = spec.resolved.call_bound
    training = [compilers()[name].train_seconds for name in stages(spec.optimizer)]
    compiled_per_q = 1 if spec.replay_from else compiled_call_bound(spec)  # a replay: one reader call
    out = {"calls_per_question_max": per_q, "zero_shot_max": spec.dev * per_q if spec.zero_shot else 0,
           "compile_max": compile_call_bound(spec.optimizer, per_q, spec.train, spec.tuning()),
           "compiled_calls_per_question_max": compiled_per_q, "compiled_max": spec.dev * compiled_per_q}
    if spec.against is not None:
        out["against_max"] = spec.dev * resolve_program(spec.against, {}, None).call_bound
    if any(training):
        seconds = round(sum(price(spec.train, spec) for price in training if price))
        if seconds:
            out["training_seconds_est"] = seconds
    return out
