"""Compile a program with a DSPy teleprompter and compare it, zero-shot vs compiled, on dev.

The run writes to one folder: `zero-shot/` and `compiled/` (per-question predictions and
summaries, appended as each question finishes), `compiled.json` (the compiled program),
and `report.json` / `report.md`. Running the same command again resumes: finished
questions are skipped and an existing `compiled.json` is loaded instead of recompiled.
With `zero_shot=False` (`--no-zero-shot`) the zero-shot side is not run and the report holds the
compiled side alone; a later run with it adds the side.

`run_optimize` is four steps: check (everything that can fail before an LM call), compile,
evaluate (compiled, then zero-shot), report.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

import treeqa.lm  # get_lm is looked up at each call (tests put a scripted LM in its place), as is get_retriever
import treeqa.retrievers
from treeqa.evaluation.records import records_file
from treeqa.evaluation.replay import check_replay_source, replay_run
from treeqa.evaluation.runs import (
    OPTIMIZE_FILES,
    EvalSpec,
    adopt_run,
    check_adoptable,
    folder_lock,
    refuse_other_kind,
    run_evaluation,
    select_examples,
)
from treeqa.lm import adapter_for
from treeqa.lm.adapter import sha256_of
from treeqa.optimize.report import write_report
from treeqa.optimize.spec import OptimizeSpec, make_teleprompter, plan, splits_for, stages
from treeqa.programs.compiled import CompiledFile, CompiledProgramError, load_program, save_compiled
from treeqa.teleprompt import compilers
from treeqa.teleprompt.annotated_demos import usable

FITS_RECORDED = ("judge_fit", "settings_search", "reader_fit", "query_fit", "finetune_fit", "together_fit",
                 "trained_reader_fit")
NOT_DECISIVE = {"threads", "api_base", "cache", "zero_shot_from", "replay_from", "zero_shot"}


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
    ids_hash = spec.id_hashes.get("train_ids_sha256")
    if compile_info.get("train_ids_sha256") != ids_hash:
        raise ValueError(f"{path} was compiled on other train questions than these (ids sha256 "
                         f"{compile_info.get('train_ids_sha256')} there, {ids_hash} now): use another --out")


@dataclass
class Checked:
    """What the check step found: the data, the index and the zero-shot program, ready."""

    out_dir: Path
    eval_spec: EvalSpec
    train_dataset: str
    splits: dict[str, str]
    trainset: list
    fit_on: list
    valset: list | None
    retriever: Any
    program: dspy.Module
    compiled_file: CompiledFile | None = None  # the folder's compiled.json, read once (a resumed run)


def plan_line(spec: OptimizeSpec, calls: dict[str, int]) -> str:
    zero_plan = f"zero-shot ≤ {calls['zero_shot_max']:,}" if spec.zero_shot else "zero-shot side skipped"
    return (f"plan: at most {calls['calls_per_question_max']} LM calls per question; "
            f"{zero_plan}, compile ≤ {calls['compile_max']:,} ({spec.optimizer}, "
            f"{spec.train} train), compiled ≤ {calls['compiled_max']:,}"
            + (f" ({calls['compiled_calls_per_question_max']} a question)"
               if calls["compiled_calls_per_question_max"] != calls["calls_per_question_max"] else "")
            + (f", {spec.against} ≤ {calls['against_max']:,}" if "against_max" in calls else "")
            + (f"; weight training ~{calls['training_seconds_est'] / 60:.0f} min on 2 cores"
               if "training_seconds_est" in calls else ""))


def _check_sources(spec: OptimizeSpec, eval_spec: EvalSpec) -> None:
    """The runs a spec starts from (--zero-shot-from, --replay-from), refused now, not after the
    compile and the compiled run."""
    if spec.zero_shot_from and not spec.zero_shot:
        raise ValueError("--zero-shot-from with --no-zero-shot: the zero-shot side is skipped, nothing would adopt it")
    if spec.zero_shot_from:
        check_adoptable(Path(spec.zero_shot_from), eval_spec)
    if spec.replay_from:  # the sample and the program now; whether the search is the same, once compiled
        check_replay_source(Path(spec.replay_from), eval_spec)


def refuse_foreign_optimize_folder(out_dir: Path) -> None:
    """Refuse, before the lock or anything else is written there, a file, an evaluation's folder,
    or a folder without spec.json holding what no optimize run writes, or a report without the
    compiled.json it reports (which `_check_folder` then reads): a user's report.md or
    compiled.json must not be replaced."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir} is a file, not a folder")
    refuse_other_kind(out_dir, "optimize")
    if not out_dir.is_dir() or (out_dir / "spec.json").is_file():
        return
    names = {p.name for p in out_dir.iterdir()}
    reports = {"report.md", "report.json"} if "compiled.json" not in names else set()
    strangers = sorted(name for name in names if name not in OPTIMIZE_FILES or name in reports)
    if strangers:
        shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
        raise ValueError(f"--out {out_dir} is not empty and holds no optimize run ({shown}): give a new or "
                         "empty folder")


def _check_folder(spec: OptimizeSpec, out_dir: Path) -> CompiledFile | None:
    """The folder holds nothing of another spec (its spec.json, its compiled.json); then this
    spec is written to it. Returns the folder's compiled file, read once, if it has one."""
    found = None
    spec_file = out_dir / "spec.json"
    if spec_file.is_file():
        try:
            earlier = OptimizeSpec.model_validate_json(spec_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{spec_file} is not an optimize spec: use another --out") from exc
        if earlier.model_dump(exclude=NOT_DECISIVE) != spec.model_dump(exclude=NOT_DECISIVE):
            by_id = " (other questions by id)" if earlier.id_hashes != spec.id_hashes else ""
            raise ValueError(f"{out_dir} holds an optimize run of another spec ({earlier.optimizer} on "
                             f"{earlier.program}, train {earlier.train}, dev {earlier.dev}){by_id}: use another --out")
    if (out_dir / "compiled.json").is_file():  # checked before spec.json is (re)written
        found = CompiledFile.read(out_dir / "compiled.json")
        check_compiled_matches(found.compile, spec, out_dir / "compiled.json")
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.model_dump_json(indent=2))
    return found


def check(spec: OptimizeSpec, out_dir: Path, hold: ExitStack | None = None) -> Checked:
    """Everything that can fail before an LM call: the sources, the samples (a train set too
    small for a held-out optimizer, one with no annotations for a compiler that needs them),
    the folder (claimed and locked before the index is built: `hold` keeps the lock), the index."""
    eval_spec = spec.eval_spec()
    _check_sources(spec, eval_spec)
    train_dataset = spec.train_from or spec.dataset
    splits = {"train": splits_for(train_dataset)[0], "dev": splits_for(spec.dataset)[1]}
    trainset = select_examples(train_dataset, splits["train"], spec.train, spec.seed, option="--train",
                               ids=spec.train_ids)
    select_examples(spec.dataset, splits["dev"], spec.dev, spec.seed, spec.skip, option="--dev", ids=spec.ids)
    names = stages(spec.optimizer)
    # GEPA reflects on minibatches of one part and accepts candidates on the other
    fit_on, valset = gepa_split(trainset) if any(compilers()[n].holds_out for n in names) else (trainset, None)
    if any(compilers()[name].needs_annotations for name in names):
        if not any(usable(ex) for ex in trainset):
            raise ValueError(f"--optimizer {spec.optimizer}: none of the {len(trainset)} {train_dataset} "
                             f"{splits['train']} questions has two or more annotated gold paragraphs (hotpotqa, "
                             "2wikimultihopqa and musique have them)")
    refuse_foreign_optimize_folder(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (hold or ExitStack()).enter_context(folder_lock(out_dir, "optimize"))  # a second run calls no LM
    found = _check_folder(spec, out_dir)
    retriever = None
    if spec.resolved.needs_retriever:
        retriever = treeqa.retrievers.get_retriever(spec.dataset, spec.retriever, corpus=spec.corpus)
    program = spec.resolved.build(retriever) if spec.start_from is None else start_program(spec, retriever)
    return Checked(out_dir, eval_spec, train_dataset, splits, trainset, fit_on, valset, retriever, program, found)


def start_program(spec: OptimizeSpec, retriever) -> dspy.Module:
    """The program in `--from`'s compiled file (its settings, fitted state and adapter), searching
    this run's index; a file of another program is an error before any LM call."""
    found = CompiledFile.read(Path(spec.start_from))
    if found.dataset != spec.dataset:
        raise ValueError(f"--from {spec.start_from} was compiled on {found.dataset}, not {spec.dataset}")
    try:
        return load_program(found, retriever=retriever, expect=spec.program)
    except CompiledProgramError as exc:
        raise ValueError(f"--from {exc}") from None


def compile_program(spec: OptimizeSpec, checked: Checked, lm: dspy.LM, echo=print) -> tuple[dspy.Module, dict]:
    """The compiled program and what its compile recorded: loaded where the folder has it,
    else compiled through the spec's compilers in order (each one's program the next one's
    student) and saved."""
    path = checked.out_dir / "compiled.json"
    if checked.compiled_file is not None:
        echo(f"[1/3] compiled program found at {path}: loading it")
        compiled = load_program(checked.compiled_file, retriever=checked.retriever, expect=spec.program)
        return compiled, checked.compiled_file.compile
    train_split = checked.splits["train"]
    echo(f"[1/3] compiling with {spec.optimizer} on {len(checked.trainset)} {checked.train_dataset} {train_split} "
         "questions")
    teacher = treeqa.lm.get_lm(spec.teacher_lm, api_base=spec.api_base) if spec.teacher_lm else None
    started = time.perf_counter()
    compiled = checked.program
    with dspy.context(lm=lm, adapter=adapter_for(lm)), dspy.track_usage() as usage:
        for name in stages(spec.optimizer):
            # a preparer marks its program compiled, as DSPy's teleprompters do; the next stage's
            # student is that program, and DSPy's bootstrapping ones refuse a compiled student
            compiled._compiled = False
            teleprompter, kwargs = make_teleprompter(spec, lm, teacher, name=name, out_dir=checked.out_dir)
            held_out = compilers()[name].holds_out
            if held_out:
                kwargs["valset"] = checked.valset
            compiled = teleprompter.compile(compiled, trainset=checked.fit_on if held_out else checked.trainset,
                                            **kwargs)
    calls_made = sum(len(v) for v in usage.usage_data.values())
    info = {"optimizer": spec.optimizer, "train": len(checked.trainset), "train_split": train_split,
            **({"train_dataset": checked.train_dataset} if spec.train_from else {}),
            **{k: v for k, v in spec.id_hashes.items() if k == "train_ids_sha256"},
            "seconds": round(time.perf_counter() - started, 1), "lm_calls": calls_made,
            "demos": {name: len(p.demos) for name, p in compiled.named_predictors()},
            "instructions_changed": changed_instructions(checked.program, compiled)}
    if spec.start_from:
        info["started_from"] = {"file": spec.start_from, "sha256": sha256_of(Path(spec.start_from))}
    for found in FITS_RECORDED:
        if getattr(compiled, found, None):
            info[found] = getattr(compiled, found)
            echo(f"      {found.replace('_', ' ')}: {info[found]}")
    save_compiled(compiled, path, name=spec.program, dataset=spec.dataset, retriever=spec.retriever,
                  preset=spec.preset, params=spec.params,
                  extra={"compile": info, **({"corpus": spec.corpus} if spec.corpus else {})})
    echo(f"      compiled in {info['seconds']:.0f}s with {calls_made} LM calls; saved to {path}")
    return compiled, info


def evaluate_sides(spec: OptimizeSpec, checked: Checked, compiled: dspy.Module, echo=print) -> tuple[dict, dict | None]:
    """The compiled side, then the zero-shot one: a long compile or compiled run reports first,
    and a run adopted with --zero-shot-from is taken as it stands now (another process may have
    grown it)."""
    out_dir = checked.out_dir
    echo(f"[2/3] compiled {spec.program} on {spec.dev} {spec.dataset} {checked.splits['dev']} questions")
    if spec.replay_from:
        # a resumed run's file as read at the start; a fresh compile's as just written
        found = checked.compiled_file or CompiledFile.read(out_dir / "compiled.json")
        comp, replayed, _ = replay_run(Path(spec.replay_from), found, lm=spec.lm,
                                       api_base=spec.api_base, out=out_dir / "compiled", cache=spec.cache,
                                       side="compiled")
        echo(f"      read from the recorded searches of {spec.replay_from} ({replayed} of {spec.dev} questions)")
    else:
        comp = run_evaluation(checked.eval_spec.model_copy(update={"side": "compiled"}), out_dir / "compiled",
                              program=compiled)
    if not spec.zero_shot:
        echo("[3/3] zero-shot side skipped (--no-zero-shot)")
        return comp, None
    zero_dir = out_dir / "zero-shot"
    if spec.zero_shot_from and not records_file(zero_dir).is_file():
        adopt_run(Path(spec.zero_shot_from), zero_dir, checked.eval_spec)
        echo(f"      zero-shot records taken from {spec.zero_shot_from}")
    echo(f"[3/3] zero-shot {spec.program} on the same {spec.dev} questions")
    zero = run_evaluation(checked.eval_spec.model_copy(update={"side": "zero-shot"}), zero_dir,
                          program=spec.resolved.build(checked.retriever))
    return comp, zero


def evaluate_baseline(spec: OptimizeSpec, checked: Checked, echo=print) -> dict | None:
    """`--against`'s program, zero-shot, on the same questions (its own run, in OUT/baseline)."""
    if spec.against is None:
        return None
    echo(f"[+] {spec.against} on the same {spec.dev} questions, every side paired with it")
    baseline = checked.eval_spec.model_copy(update={"program": spec.against, "params": {}, "preset": None,
                                                    "side": None})
    return run_evaluation(EvalSpec.model_validate(baseline.model_dump()), checked.out_dir / "baseline")


FEW_QUESTIONS = 30  # below this a figure shows the way, not a claim (one question is 3.3 EM at 30)


def few_questions_line(spec: OptimizeSpec) -> str | None:
    if spec.dev >= FEW_QUESTIONS:
        return None
    return (f"{spec.dev} questions: one question moves EM by {100 / spec.dev:.0f} points, so these figures show "
            "the way, not a claim (docs/results.md holds the figures on 100-197 questions)")


def run_optimize(spec: OptimizeSpec, out: str | Path | None = None, *, plan_only: bool = False,
                 echo=print) -> dict[str, Any]:
    """Compile on train against EM, evaluate compiled then zero-shot on dev, report; resumable."""
    out_dir = Path(out) if out else spec.default_out()
    calls = plan(spec)
    echo(plan_line(spec, calls))
    if plan_only:  # computed from the settings: no data read, no index built, no model loaded
        return {"plan": calls, "out": out_dir}
    with ExitStack() as hold:  # the folder's lock, from its claim in `check` to the report
        checked = check(spec, out_dir, hold)
        compiled, compile_info = compile_program(spec, checked, treeqa.lm.get_lm(spec.lm, api_base=spec.api_base), echo)
        comp, zero = evaluate_sides(spec, checked, compiled, echo)
        baseline = evaluate_baseline(spec, checked, echo)
        written = write_report(spec, out_dir, checked.splits, comp, zero, compile_info, calls,
                               len(checked.trainset), baseline=baseline, note=few_questions_line(spec))
    echo(written["table"])
    if written["paired_table"]:
        echo(written["paired_table"])
    if few_questions_line(spec):
        echo(few_questions_line(spec))
    echo(f"written to {out_dir}")
    return {"report": written["report"], "out": out_dir, "table": written["table"]}
