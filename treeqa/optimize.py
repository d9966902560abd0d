"""Compile a program with a DSPy teleprompter and compare it, zero-shot vs compiled, on dev.

The run writes to one folder: `zero-shot/` and `compiled/` (per-question predictions and
summaries, appended as each question finishes), `compiled.json` (the compiled program),
and `report.json` / `report.md`. Running the same command again resumes: finished
questions are skipped and an existing `compiled.json` is loaded instead of recompiled.
With `zero_shot=False` (`--no-zero-shot`) the zero-shot side is not run and the report holds the
compiled side alone; a later run with it adds the side.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import dspy
from pydantic import BaseModel, Field, model_validator

from treeqa.evaluation.runs import (
    RUNS_DIR,
    EvalSpec,
    adopt_run,
    check_adoptable,
    check_spec_names,
    run_evaluation,
    select_examples,
    versions,
)
from treeqa.evaluation.stats import PAIRED_KEYS, compare_records
from treeqa.evaluation.tables import comparison_table, data_line, markdown_table
from treeqa.programs import DEFAULT_PROGRAM, resolve_settings, validate_params


def optimizer_names() -> tuple[str, ...]:
    """Every `--optimizer`, as the compiler registry (`treeqa.teleprompt`) has them."""
    from treeqa.teleprompt import compilers

    return tuple(compilers())


def fitting_optimizers(program_class: type) -> tuple[str, ...]:
    """The `--optimizer`s that can compile `program_class` (each compiler's `fits`)."""
    from treeqa.teleprompt import compilers

    return tuple(name for name, c in compilers().items() if c.fits(program_class))


def preparers() -> tuple[str, ...]:
    """Compilers that prepare a program from annotations or settings: an EM teleprompter can
    run on what one of them made (`--optimizer path-judge+reader`)."""
    from treeqa.teleprompt import compilers

    return tuple(name for name, c in compilers().items() if c.preparer)


def stages(optimizer: str) -> list[str]:
    """The compilers `--optimizer` names, in order: a preparer, a weight training and an EM
    teleprompter, each at most once and in that order (e.g. path-judge+finetune+reader)."""
    from treeqa.teleprompt import compilers

    names, known, ready = optimizer.split("+"), optimizer_names(), preparers()
    if any(n not in known for n in names) or len(names) > 3:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(known)}, or a preparer "
                         f"({', '.join(ready)}) then another, joined by '+' (e.g. path-judge+reader)")
    ranks = [0 if n in ready else 1 if compilers()[n].weights else 2 for n in names]
    if any(b <= a for a, b in zip(ranks, ranks[1:], strict=False)):
        raise ValueError(f"--optimizer {optimizer}: a preparer ({', '.join(ready)}), then a weight training "
                         "(finetune), then an EM teleprompter, each at most once and in that order "
                         "(e.g. path-judge+reader, annotated+mipro, path-judge+finetune+reader)")
    return names


# --- splits -------------------------------------------------------------------------------

def splits_for(dataset: str) -> tuple[str, str]:
    """(train split, evaluation split): evaluate on the split the papers report
    (`EVAL_SPLITS`), compile on train, else on the remaining split (NQ/TriviaQA: dev)."""
    from treeqa.data import EVAL_SPLITS, SPLITS

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
    from treeqa.teleprompt import compilers

    return sum(compilers()[name].call_bound(per_q, n_train, settings) for name in stages(optimizer))


# --- teleprompters ------------------------------------------------------------------------

class OptimizeSpec(BaseModel):
    """One optimize run: what to compile, how, and where it is evaluated."""

    program: str = DEFAULT_PROGRAM
    dataset: str = "hotpotqa"
    optimizer: str = "bootstrap"
    train_from: str | None = None  # compile on this dataset's train split (annotation-only compilers)
    train: int = Field(20, ge=1)
    dev: int = Field(20, ge=1)  # `make demo` (ToR, 20 dev questions) takes about 15 minutes on 2 cores
    seed: int = 0
    skip: int = Field(0, ge=0)  # dev questions left out at the start of the seeded order (already examined)
    lm: str = "local"
    api_base: str | None = None
    teacher_lm: str | None = None
    retriever: str = "dense"
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

    @model_validator(mode="after")
    def _known_names(self) -> OptimizeSpec:
        """Unknown names and bad settings fail before any folder is made or any LM is called."""
        names = stages(self.optimizer)
        check_spec_names(self.program, self.dataset, None, self.retriever, self.preset)
        validate_params(self.program, self.params)
        from treeqa.programs import PROGRAMS
        from treeqa.teleprompt import compilers

        if self.train_from is not None:
            splits_for(self.train_from)  # an unknown dataset is an error here
            searching = [n for n in names if not compilers()[n].from_annotations]
            if searching:
                able = ", ".join(n for n, c in compilers().items() if c.from_annotations)
                raise ValueError(f"--train-from {self.train_from}: {', '.join(searching)} runs the program on the "
                                 f"train questions, over the {self.dataset} corpus that does not hold their "
                                 "paragraphs; only compilers that learn from the annotations alone can train on "
                                 f"another dataset ({able})")
        for name in names:
            compiler = compilers()[name]
            if not compiler.fits(PROGRAMS[self.program]):
                fitting = [p for p, cls in PROGRAMS.items() if compiler.fits(cls)]
                raise ValueError(f"--optimizer {self.optimizer}: {self.program} {compiler.unfit} "
                                 f"(programs it fits: {', '.join(fitting) or 'none'})")
            reason = compiler.refuses(PROGRAMS[self.program],
                                      resolve_settings(self.program, self.params, self.preset))
            if reason:
                preset = f" --preset {self.preset}" if self.preset else ""
                raise ValueError(f"--optimizer {self.optimizer}: {self.program}{preset} {reason}")
        return self

    def eval_spec(self) -> EvalSpec:
        _, dev_split = splits_for(self.dataset)
        return EvalSpec(program=self.program, dataset=self.dataset, split=dev_split, n=self.dev, seed=self.seed,
                        skip=self.skip, lm=self.lm, api_base=self.api_base, retriever=self.retriever,
                        corpus=self.corpus, preset=self.preset,
                        params=self.params, threads=self.threads, cache=self.cache)

    def default_out(self) -> Path:
        label = self.program + (f"-{self.preset}" if self.preset else "")
        exclude = ({"threads", "api_base", "cache", "zero_shot_from", "replay_from", "zero_shot"}
                   | ({"skip"} if not self.skip else set())
                   | ({"train_from"} if self.train_from is None else set()))
        key = EvalSpec(program=self.program, params={**self.params, "_opt": self.model_dump(exclude=exclude)}).key()
        return RUNS_DIR / "optimize" / f"{self.dataset}-{label}-{self.optimizer}-{key}"

    def tuning(self) -> dict[str, int]:
        return {"candidates": self.candidates, "trials": self.trials, "breadth": max(2, self.candidates),
                "depth": 1, "steps": 2, "bsize": min(4, self.train), "metric_calls": self.metric_calls}


def make_teleprompter(spec: OptimizeSpec, task_lm: dspy.LM, teacher_lm: dspy.LM | None, name: str | None = None,
                      out_dir: Path | None = None):
    """The teleprompter `name` (default: the spec's one optimizer) and its compile() keyword
    arguments, as its compiler declares them; `out_dir` keeps what a compile records."""
    from treeqa.teleprompt import CompileContext, compilers

    name = name or spec.optimizer
    if name not in compilers():
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(optimizer_names())}")
    return compilers()[name].build(CompileContext(spec, task_lm, teacher_lm, out_dir))


# --- the run --------------------------------------------------------------------------------

def plan(spec: OptimizeSpec) -> dict[str, int]:
    """The LM-call budget of a run, from the settings alone (no index, no model)."""
    from treeqa.programs import call_bound
    from treeqa.teleprompt import compilers

    per_q = call_bound(spec.program, spec.params, spec.preset)
    training = [compilers()[name].train_seconds for name in stages(spec.optimizer)]
    out = {"calls_per_question_max": per_q, "zero_shot_max": spec.dev * per_q if spec.zero_shot else 0,
           "compile_max": compile_call_bound(spec.optimizer, per_q, spec.train, spec.tuning()),
           "compiled_max": spec.dev * (1 if spec.replay_from else per_q)}  # a replay: one reader call
    if any(training):
        out["training_seconds_est"] = round(sum(price(spec.train) for price in training if price))
    return out


def gepa_split(trainset: list) -> tuple[list, list]:
    """GEPA's (train, val): 60/40. Without a valset GEPA scores every candidate on all of
    train, which spends most of a small metric-call budget on the first full evaluation."""
    if len(trainset) < 2:
        raise ValueError("this optimizer needs at least 2 train questions (it holds some out to score candidates)")
    cut = max(1, round(len(trainset) * 0.6))
    return trainset[:cut], trainset[cut:]


def changed_instructions(before: dspy.Module, after: dspy.Module) -> list[str]:
    """Names of the predictors whose instructions the teleprompter rewrote."""
    old = {name: p.signature.instructions for name, p in before.named_predictors()}
    return [name for name, p in after.named_predictors() if old.get(name) != p.signature.instructions]


def check_compiled_matches(compile_info: dict, spec: OptimizeSpec, path: Path) -> None:
    """A compiled.json found in the folder must be what this spec would compile: a folder that
    lost its spec.json must not report another optimizer's program under this one's name."""
    wanted = {"optimizer": spec.optimizer, "train": spec.train}
    found = {key: compile_info.get(key) for key in wanted}
    if found != wanted:
        raise ValueError(f"{path} was compiled with {found['optimizer']!r} on {found['train']} train questions, "
                         f"not {spec.optimizer!r} on {spec.train}: use another --out")


def run_optimize(spec: OptimizeSpec, out: str | Path | None = None, *, plan_only: bool = False,
                 echo=print) -> dict[str, Any]:
    """Compile on train against EM, evaluate compiled then zero-shot on dev, report; resumable."""
    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs import build_program, uses_retriever
    from treeqa.programs.compiled import load_program, read_recipe, save_compiled
    from treeqa.retrievers import get_retriever

    names = stages(spec.optimizer)
    out_dir = Path(out) if out else spec.default_out()
    train_dataset = spec.train_from or spec.dataset
    train_split, dev_split = splits_for(train_dataset)[0], splits_for(spec.dataset)[1]
    calls = plan(spec)
    zero_plan = f"zero-shot ≤ {calls['zero_shot_max']:,}" if spec.zero_shot else "zero-shot side skipped"
    echo(f"plan: at most {calls['calls_per_question_max']} LM calls per question; "
         f"{zero_plan}, compile ≤ {calls['compile_max']:,} ({spec.optimizer}, "
         f"{spec.train} train), compiled ≤ {calls['compiled_max']:,}"
         + (f"; weight training ~{calls['training_seconds_est'] / 60:.0f} min on 2 cores"
            if "training_seconds_est" in calls else ""))
    if plan_only:  # computed from the settings: no data read, no index built, no model loaded
        return {"plan": calls, "out": out_dir}
    eval_spec = spec.eval_spec()
    if spec.zero_shot_from and not spec.zero_shot:
        raise ValueError("--zero-shot-from with --no-zero-shot: the zero-shot side is skipped, nothing would adopt it")
    if spec.zero_shot_from:  # refused now, not after the compile and the compiled run
        check_adoptable(Path(spec.zero_shot_from), eval_spec)
    if spec.replay_from:  # the sample and the program now; whether the search is the same, once compiled
        from treeqa.evaluation.replay import check_replay_source

        check_replay_source(Path(spec.replay_from), eval_spec)
    trainset = select_examples(train_dataset, train_split, spec.train, spec.seed, option="--train")
    select_examples(spec.dataset, dev_split, spec.dev, spec.seed, spec.skip, option="--dev")
    # GEPA reflects on minibatches of one part and accepts candidates on the other; split
    # before any evaluation, so a train set too small for it fails at once
    from treeqa.teleprompt import compilers

    holds_out = any(compilers()[name].holds_out for name in names)
    fit_on, valset = gepa_split(trainset) if holds_out else (trainset, None)
    if any(compilers()[name].needs_annotations for name in names):  # fail before any evaluation
        from treeqa.teleprompt.annotated_demos import usable

        if not any(usable(ex) for ex in trainset):
            raise ValueError(f"--optimizer {spec.optimizer}: none of the {len(trainset)} {train_dataset} {train_split} "
                             "questions has two or more annotated gold paragraphs (hotpotqa, 2wikimultihopqa "
                             "and musique have them)")
    needs_index = uses_retriever(spec.program, spec.params, spec.preset)
    retriever = get_retriever(spec.dataset, spec.retriever, corpus=spec.corpus) if needs_index else None
    program = build_program(spec.program, retriever, preset=spec.preset, **spec.params)
    spec_file = out_dir / "spec.json"
    if spec_file.is_file():
        decisive = {"threads", "api_base", "cache", "zero_shot_from", "replay_from", "zero_shot"}
        try:
            earlier = OptimizeSpec.model_validate_json(spec_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{spec_file} is not an optimize spec: use another --out") from exc
        if earlier.model_dump(exclude=decisive) != spec.model_dump(exclude=decisive):
            raise ValueError(f"{out_dir} holds an optimize run of another spec ({earlier.optimizer} on "
                             f"{earlier.program}, train {earlier.train}, dev {earlier.dev}): use another --out")
    if (out_dir / "compiled.json").is_file():  # checked before spec.json is (re)written
        check_compiled_matches(read_recipe(out_dir / "compiled.json")[0].get("compile") or {}, spec,
                               out_dir / "compiled.json")
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.model_dump_json(indent=2))

    compiled_path = out_dir / "compiled.json"
    lm = get_lm(spec.lm, api_base=spec.api_base)
    compile_info: dict[str, Any]
    if compiled_path.is_file():
        echo(f"[1/3] compiled program found at {compiled_path}: loading it")
        compiled = load_program(compiled_path, retriever=retriever, expect=spec.program)
        compile_info = read_recipe(compiled_path)[0].get("compile") or {}
    else:
        echo(f"[1/3] compiling with {spec.optimizer} on {len(trainset)} {train_dataset} {train_split} questions")
        teacher = get_lm(spec.teacher_lm, api_base=spec.api_base) if spec.teacher_lm else None
        started = time.perf_counter()
        compiled = program
        with dspy.context(lm=lm, adapter=adapter_for(lm)), dspy.track_usage() as usage:
            for name in names:  # a preparer's program is the next teleprompter's student
                teleprompter, kwargs = make_teleprompter(spec, lm, teacher, name=name, out_dir=out_dir)
                held_out = compilers()[name].holds_out
                if held_out:
                    kwargs["valset"] = valset
                compiled = teleprompter.compile(compiled, trainset=fit_on if held_out else trainset, **kwargs)
        calls_made = sum(len(v) for v in usage.usage_data.values())
        compile_info = {"optimizer": spec.optimizer, "train": len(trainset), "train_split": train_split,
                        **({"train_dataset": train_dataset} if spec.train_from else {}),
                        "seconds": round(time.perf_counter() - started, 1), "lm_calls": calls_made,
                        "demos": {name: len(p.demos) for name, p in compiled.named_predictors()},
                        "instructions_changed": changed_instructions(program, compiled)}
        for found in ("judge_fit", "settings_search", "reader_fit", "query_fit", "finetune_fit"):
            if getattr(compiled, found, None):
                compile_info[found] = getattr(compiled, found)
                echo(f"      {found.replace('_', ' ')}: {compile_info[found]}")
        save_compiled(compiled, compiled_path, name=spec.program, dataset=spec.dataset, retriever=spec.retriever,
                      preset=spec.preset, params=spec.params,
                      extra={"compile": compile_info, **({"corpus": spec.corpus} if spec.corpus else {})})
        echo(f"      compiled in {compile_info['seconds']:.0f}s with {calls_made} LM calls; saved to {compiled_path}")

    echo(f"[2/3] compiled {spec.program} on {spec.dev} {spec.dataset} {dev_split} questions")
    if spec.replay_from:
        from treeqa.evaluation.replay import replay_run

        comp, replayed, _ = replay_run(Path(spec.replay_from), compiled_path, lm=spec.lm, api_base=spec.api_base,
                                       out=out_dir / "compiled", cache=spec.cache)
        echo(f"      read from the recorded searches of {spec.replay_from} ({replayed} of {spec.dev} questions)")
    else:
        comp = run_evaluation(eval_spec, out_dir / "compiled", program=compiled)

    # the zero-shot side last: a long compile or compiled run reports first, and a run adopted
    # with --zero-shot-from is taken as it stands now (another process may have grown it)
    zero = None
    if spec.zero_shot:
        zero_dir = out_dir / "zero-shot"
        if spec.zero_shot_from and not (zero_dir / "predictions.jsonl").is_file():
            adopt_run(Path(spec.zero_shot_from), zero_dir, eval_spec)
            echo(f"      zero-shot records taken from {spec.zero_shot_from}")
        echo(f"[3/3] zero-shot {spec.program} on the same {spec.dev} questions")
        zero = run_evaluation(eval_spec, zero_dir, program=build_program(spec.program, retriever, preset=spec.preset,
                                                                          **spec.params))
    else:
        echo("[3/3] zero-shot side skipped (--no-zero-shot)")

    rows = ({f"{spec.program} zero-shot": zero["summary"]} if zero else {}) | {
        f"{spec.program} compiled ({spec.optimizer})": comp["summary"]}
    table = markdown_table(rows)
    paired = compare_records(comp["records"], zero["records"], keys=PAIRED_KEYS) if zero else None
    paired_table = comparison_table({"compiled vs zero-shot": paired}) if zero else ""
    report = {"spec": spec.model_dump(), "splits": {"train": train_split, "dev": dev_split}, "data": comp["data"],
              "zero_shot": zero["summary"] if zero else None, "compiled": comp["summary"],
              "compiled_vs_zero_shot": paired,
              "compile": compile_info, "plan": calls,
              "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]), "versions": versions()}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    pairing = ("Paired on the same questions (95% paired-bootstrap interval; exact McNemar test on EM); "
               "'better' or 'worse' only when the interval excludes 0 and the McNemar test agrees "
               f"(p < 0.05):\n\n{paired_table}" if zero else
               "The zero-shot side was skipped (--no-zero-shot): pair the compiled records with a baseline run "
               "of the same questions.")
    (out_dir / "report.md").write_text(
        f"# {spec.program} on {spec.dataset}: {'zero-shot vs ' if zero else ''}compiled ({spec.optimizer})\n\n"
        f"Command: `{report['command']}`\n\n{data_line(comp['data'])}\n\n{table}\n\n{pairing}\n\n"
        f"Compiled on {len(trainset)} {train_dataset} {train_split} questions in {compile_info.get('seconds', '?')} s "
        f"({compile_info.get('lm_calls', '?')} LM calls); demos per predictor: {compile_info.get('demos', {})}; "
        f"instructions rewritten: {compile_info.get('instructions_changed', [])}"
        f"{'; judge fitted: ' + str(compile_info['judge_fit']) if compile_info.get('judge_fit') else ''}"
        f"{'; settings search: ' + str(compile_info['settings_search']) if compile_info.get('settings_search') else ''}"
        f"{'; reader on recorded reads: ' + str(compile_info['reader_fit']) if compile_info.get('reader_fit') else ''}"
        f"{'; query writer on gold paths: ' + str(compile_info['query_fit']) if compile_info.get('query_fit') else ''}"
        ".\n"
        f"Versions: {report['versions']}\n")
    echo(table)
    if paired_table:
        echo(paired_table)
    echo(f"written to {out_dir}")
    return {"report": report, "out": out_dir, "table": table}
