"""One evaluation run, described by a spec, written to a folder (predictions, summary, command)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

import dspy
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, computed_field, field_validator, model_validator

from treeqa.data import DEFAULT_DATASET, SPLITS, corpus_description, load_examples
from treeqa.data.loaders import get_dataset
from treeqa.data.sample_ids import ids_sha256, sample_info
from treeqa.data.samples import load_by_ids
from treeqa.evaluation.decisions import decisions
from treeqa.evaluation.loop import evaluate
from treeqa.evaluation.machine import machine
from treeqa.evaluation.records import (
    RECORDS_NAME,
    check_whole,
    copy_records,
    read_records,
    records_file,
    refuse_compressed,
    rewrite_records,
)
from treeqa.evaluation.tables import markdown_table, seconds_table
from treeqa.lm import adapter_for, is_embedded
from treeqa.programs import ProgramSpec, resolve_program
from treeqa.programs.compiled import run_adapters_with
from treeqa.retrievers import DEFAULT_KIND, RETRIEVERS
from treeqa.settings import default_runs_dir, get_settings, portable_path, recorded_command, without_userinfo

RUNS_DIR = default_runs_dir()


def check_spec_names(dataset: str, split: str | None, retriever: str) -> None:
    """Every name a run folder is made from must be one we know (no '../' can reach a path; the
    program's and preset's are checked by `resolve_program`)."""
    splits = get_dataset(dataset).splits  # an unknown name: the registry's error, naming the choices
    if split is not None and split not in splits:
        raise ValueError(f"{dataset} has no split {split!r}; available: {', '.join(splits)}")
    RETRIEVERS.lookup(retriever)


def compiled_params(path: str | Path) -> dict[str, str]:
    """The params that name a compiled file in a spec: its path, for a reader (and `replay`, to
    find the search it ran), and its sha256, which is what keys the run. A checkout in another
    folder, or a copy of the same file, then resumes the run; a changed file is another run. The
    path is relative to the working folder where the file lies inside it (`portable_path`)."""
    path = Path(path).resolve()
    return {"_compiled": portable_path(path), "_compiled_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


class EvalSpec(BaseModel):
    """Everything that decides an evaluation's results; its hash names the default folder."""

    program: str
    dataset: str = DEFAULT_DATASET
    split: str = "dev"
    n: int = Field(30, ge=1)
    seed: int = 0
    skip: int = Field(0, ge=0)  # leave out the first `skip` of the seeded order (questions already examined)
    ids: list[str] | None = None  # exactly these questions, in this order (--sample/--ids), not a seeded draw
    sample: str | None = None  # the committed sample `ids` come from, by name (a label: the ids decide)
    lm: str = "local"
    api_base: str | None = None
    reader_model: str | None = None  # on an endpoint: the model it serves a compiled file's LoRA adapter under
    retriever: str = DEFAULT_KIND
    corpus: str | None = None  # a registered corpus of your own, searched instead of the dataset's
    preset: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    threads: int = Field(1, ge=1)
    cache: bool = True  # DSPy's response cache; off for runs whose costs are reported
    # which side of an optimize run this is (None: a run of its own); the compiled side's records
    # are not a zero-shot run's, so its key holds it
    side: Literal["compiled", "zero-shot"] | None = None

    _resolved: ProgramSpec | None = PrivateAttr(default=None)

    @field_validator("api_base")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        """A spec is written to a folder: a URL's `user:secret@` stays in this process alone."""
        return without_userinfo(url)

    @model_validator(mode="after")
    def _known_names(self) -> EvalSpec:
        """Unknown names and bad settings fail here, before any folder is made from them; the
        program is resolved once, here, for everything downstream (`resolved`)."""
        self._resolved = resolve_program(self.program, self.params, self.preset)
        check_spec_names(self.dataset, self.split, self.retriever)
        if self.ids is not None:
            self._check_ids()
        if self.corpus is not None:
            # late: tests replace treeqa.retrievers.check_corpus_name, so it is read at call time
            from treeqa.retrievers import check_corpus_name

            check_corpus_name(self.corpus)
        return self

    def _check_ids(self) -> None:
        """A run by ids asks each id once and all of them (n is their number); a sample name is a
        committed one (it names the default folder)."""
        if not self.ids or len(set(self.ids)) != len(self.ids):
            raise ValueError("ids must name at least one question, each once")
        if self.skip or self.seed:  # the ids are the questions, in their order: a skip or seed would be ignored
            raise ValueError("questions by id (--sample/--ids) are asked as listed: --skip and --seed do not apply")
        if self.n != len(self.ids):
            raise ValueError(f"n={self.n} but {len(self.ids)} ids are given: a run by ids asks them all")
        if self.sample is not None:
            sample_info(self.sample)

    @computed_field
    @property
    def ids_sha256(self) -> str | None:
        """The hash of the ids a run by ids asks (what its key holds in place of the list; spec.json
        shows it)."""
        return ids_sha256(self.ids) if self.ids is not None else None

    @property
    def resolved(self) -> ProgramSpec:
        """The program this run evaluates, with its settings resolved (see `resolve_program`)."""
        return self._resolved

    def decisive(self) -> dict[str, Any]:
        """The fields that decide results (a field added later counts only when set, so the
        keys of earlier runs stay the same)."""
        out = self.model_dump(exclude={"threads", "api_base", "cache", "ids", "sample", "ids_sha256"})
        if out["side"] != "compiled":  # a zero-shot side is the zero-shot run: a reference run adopts into it
            del out["side"]
        if out["corpus"] is None:
            del out["corpus"]
        if out["reader_model"] is None:
            del out["reader_model"]
        if not out["skip"]:
            del out["skip"]
        if self.ids is not None:  # the ids themselves, by their hash: other ids are another run
            out["ids_sha256"] = self.ids_sha256
        if "_compiled_sha256" in out["params"]:  # the file by its content, not where it lies (earlier runs: its path)
            out["params"] = {k: v for k, v in out["params"].items() if k != "_compiled"}
        return out

    def key(self) -> str:
        return hashlib.sha1(json.dumps(self.decisive(), sort_keys=True).encode()).hexdigest()[:8]

    def default_out(self) -> Path:
        label = self.program + (f"-{self.preset}" if self.preset else "")
        if self.ids is not None:
            return RUNS_DIR / (self.sample or f"{self.dataset}-{self.split}-ids-{self.ids_sha256[:8]}") / \
                f"{label}-{self.key()}"
        skipped = f"-skip{self.skip}" if self.skip else ""
        return RUNS_DIR / f"{self.dataset}-{self.split}-n{self.n}-s{self.seed}{skipped}" / f"{label}-{self.key()}"


def versions() -> dict[str, str]:
    out = {}
    for package in ("treeqa", "dspy", "llama-cpp-python", "sentence-transformers", "faiss-cpu"):
        out[package] = version(package)
    return out


def split_threads(program: str, threads: int, lm) -> tuple[int, int]:
    """(calls in parallel inside a question, questions in parallel) for `--threads`.

    The embedded engine serves one call at a time: both are 1. Against an endpoint an
    evaluation runs `threads` questions at once, whatever the program: questions are
    independent, while inside one question a search level holds only a few independent calls
    (a beam's 2 state chains, a node's 3-5 reviews) and levels follow each other, so on a
    simulated endpoint 4 threads gave the beam 1.8x inside questions and 3.8x across them
    (`benchmarks/endpoint.md`). A program's own `threads` setting (`--param threads=N`, what
    serving one question at a time wants) still sends a level's calls together.
    """
    if threads <= 1 or is_embedded(lm):
        return 1, 1
    return 1, threads


# what a run folder holds; a folder with anything else and no spec.json is not a run to write into
RUN_FILES = frozenset({"spec.json", "predictions.jsonl", "predictions.jsonl.gz", "predictions.jsonl.tmp",
                       "predictions.jsonl.adopting",
                       "summary.json", ".lock", "view.html"})


SIDES = ("compiled", "zero-shot")
# what an optimize run's folder holds (its compilers keep their records beside compiled.json)
OPTIMIZE_FILES = frozenset({"spec.json", "compiled.json", "report.json", "report.md", *SIDES, ".lock", "view.html",
                            "finetune", "query-calls.jsonl", "recorded-reads.jsonl", "reader", "baseline"})
KINDS = {"evaluate": "an evaluation run (treeqa evaluate)", "optimize": "an optimize run (treeqa optimize)"}


def folder_kind(out_dir: Path) -> str | None:
    """'optimize' or 'evaluate' for a folder a run wrote: by its spec.json (an optimize spec names
    an optimizer), else by the files only that kind writes; None for anything else."""
    spec_file = out_dir / "spec.json"
    if spec_file.is_file():
        try:
            doc = json.loads(spec_file.read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        return ("optimize" if "optimizer" in doc else "evaluate") if isinstance(doc, dict) else None
    if not out_dir.is_dir():
        return None
    names = {p.name for p in out_dir.iterdir()}
    if names & {"compiled.json", "report.json"}:
        return "optimize"
    if names & {"predictions.jsonl", "predictions.jsonl.gz", "summary.json"}:
        return "evaluate"
    return None


def refuse_other_kind(out_dir: Path, kind: str) -> None:
    """A folder of the other kind of run is refused, naming what it holds."""
    found = folder_kind(out_dir)
    if found is not None and found != kind:
        raise ValueError(f"--out {out_dir} holds {KINDS[found]}, and this is {KINDS[kind]}: use another --out")


def folder_side(out_dir: Path) -> str | None:
    """The side of an optimize run `out_dir` is ('compiled' or 'zero-shot'), by its place in the
    optimize folder: what tells the sides apart in folders written before specs held it."""
    out_dir = Path(out_dir)
    if out_dir.name in SIDES and folder_kind(out_dir.parent) == "optimize":
        return out_dir.name
    return None


def _side_name(side: str | None) -> str:
    return f"the {side} side of an optimize run" if side else "a run of its own (treeqa evaluate)"


def refuse_foreign_folder(out_dir: Path) -> None:
    """Refuse a folder that holds something other than a run and no spec.json (before anything,
    even the lock, is written there)."""
    if not out_dir.is_dir() or (out_dir / "spec.json").is_file():
        return
    strangers = sorted(p.name for p in out_dir.iterdir() if p.name not in RUN_FILES)
    if strangers:
        shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
        raise ValueError(f"--out {out_dir} is not empty and holds no run ({shown}): give a new or empty folder")


def claim_folder(out_dir: Path, spec: EvalSpec) -> None:
    """Make `out_dir` this spec's folder; a folder written by another spec is refused, naming both."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir} is a file, not a folder")
    spec_file = out_dir / "spec.json"
    if spec_file.is_file():
        earlier = read_spec(spec_file, "use another output folder")
        side = earlier.side or folder_side(out_dir)
        if side != spec.side:
            raise ValueError(f"{out_dir} holds {_side_name(side)}, and this is {_side_name(spec.side)}: "
                             "use another --out")
        if earlier.side is None and spec.side is not None:
            _name_the_side(out_dir, earlier, spec)
        if earlier.key() != spec.key():
            raise ValueError(f"{out_dir} holds a run of another spec:\n  there: {describe_spec(earlier)}\n"
                             f"  now:   {describe_spec(spec)}\nuse another --out (or the default folder)")
    else:  # no spec.json (deleted, or a copied folder): the records' keys say whose folder it is
        refuse_foreign_folder(out_dir)

        keys = {r.get("run") for r in read_records(records_file(out_dir))} - {None, spec.key()}
        if keys:
            raise ValueError(f"{out_dir} has no spec.json but holds records of another spec "
                             f"({', '.join(sorted(map(str, keys)))}; this one is {spec.key()}): "
                             "use another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.model_dump_json(indent=2))


def _name_the_side(out_dir: Path, earlier: EvalSpec, spec: EvalSpec) -> None:
    """An optimize side written before specs named their side: its records take the key of the
    spec that names it, so the run resumes (and `earlier` is then that spec)."""
    old_key, earlier.side = earlier.key(), spec.side
    records = out_dir / RECORDS_NAME
    if earlier.key() == old_key or not records.is_file():
        return
    kept = read_records(records)
    if any(r.get("run") not in (None, old_key) for r in kept):
        return  # another spec's records: refused as they are
    rewrite_records(records, [{**r, "run": earlier.key()} for r in kept])


def adopt_run(source: Path, out_dir: Path, spec: EvalSpec) -> None:
    """Start `out_dir` from a finished (or partial) run of the same spec in `source`, so its
    questions are not asked again (optimize's zero-shot side reusing a reference run). The
    source is only read (its records decompressed into `out_dir` when they are compressed); a run
    of another spec is refused, naming both."""
    check_adoptable(source, spec)
    refuse_compressed(out_dir / RECORDS_NAME)
    out_dir.mkdir(parents=True, exist_ok=True)
    if (source / "spec.json").is_file():
        shutil.copyfile(source / "spec.json", out_dir / "spec.json")
    copy_records(source, out_dir)


def check_adoptable(source: Path, spec: EvalSpec) -> None:
    """Refuse a `source` that is not a run of `spec`, before anything is run."""
    spec_file = source / "spec.json"
    if not spec_file.is_file():
        raise ValueError(f"{source} is not a run folder (no spec.json)")
    earlier = read_spec(spec_file)
    side = earlier.side or folder_side(source)
    if side == "compiled" and spec.side != "compiled":
        raise ValueError(f"{source} is the compiled side of an optimize run, not a zero-shot run: give a run of "
                         "the zero-shot program")
    if earlier.key() != spec.key():
        raise ValueError(f"{source} holds a run of another spec:\n  there: {describe_spec(earlier)}\n"
                         f"  needed: {describe_spec(spec)}")
    check_whole(source)


def read_spec(spec_file: Path, advice: str = "") -> EvalSpec:
    """The EvalSpec in a run's spec.json; one that is not (not JSON, a field wrong, unreadable) is
    an error naming the file and the first fault, cut short, never the whole value echoed."""
    advice_text = f": {advice}" if advice else ""
    try:
        return EvalSpec.model_validate_json(spec_file.read_bytes())
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(map(str, error["loc"]))
        fault = (f"{where}: " if where else "") + error["msg"][:200]
        raise ValueError(f"{spec_file} is not an evaluation spec ({fault}){advice_text}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        fault = f"{type(exc).__name__}: {str(exc)[:200]}"
        raise ValueError(f"{spec_file} is not an evaluation spec ({fault}){advice_text}") from exc


def describe_spec(spec: EvalSpec) -> str:
    return f"{spec.key()} " + " ".join(f"{k}={v}" for k, v in spec.decisive().items() if v not in (None, {}))


@contextmanager
def folder_lock(out_dir: Path, run: str = "evaluation") -> Iterator[None]:
    """One run writes to a folder at a time; a second is refused at once."""
    lock = FileLock(out_dir / ".lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ValueError(f"another {run} is writing to {out_dir}; wait for it or use another --out") from None
    try:
        yield
    finally:
        lock.release()


def run_evaluation(spec: EvalSpec, out: str | Path | None = None, program=None,
                   retry_failed: bool = False, max_errors: int | None = 10,
                   question_budget: float | None = None,
                   only: Callable[[list], list] | None = None) -> dict[str, Any]:
    """Evaluate `spec` (or a given, e.g. compiled, `program`), resuming from the folder's predictions.

    A folder holds one spec: resuming it with another is refused. `retry_failed` runs again
    the questions whose records hold a failed LM call or an error; `max_errors` stops the
    run after that many questions in a row whose LM calls all failed. `only` keeps part of the
    spec's sample (a replay: the questions a recorded run has reached so far).
    """
    if max_errors is not None and max_errors < 0:
        raise ValueError(f"--max-errors must be 0 (never stop) or more, got {max_errors}")
    if question_budget is not None and not question_budget > 0:
        raise ValueError(f"--question-budget must be a positive number of seconds, got {question_budget}")
    examples = select_examples(spec.dataset, spec.split, spec.n, spec.seed, spec.skip, option="--n", ids=spec.ids)
    if only is not None:
        examples = only(examples)
    out_dir = Path(out) if out else spec.default_out()
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir} is a file, not a folder")
    refuse_other_kind(out_dir, "evaluate")
    refuse_foreign_folder(out_dir)
    refuse_compressed(out_dir / RECORDS_NAME)  # before anything is written there
    out_dir.mkdir(parents=True, exist_ok=True)
    with folder_lock(out_dir):
        claim_folder(out_dir, spec)
        return _run_locked(spec, examples, out_dir, program, retry_failed, max_errors, question_budget)


def select_examples(dataset: str, split: str, n: int, seed: int, skip: int = 0, option: str = "--n",
                    ids: list[str] | None = None) -> list:
    """The seeded sample a spec names, or its `ids` in their order; asking for more questions
    than the split holds is an error (a spec that says 100000 must not silently mean 297)."""
    if ids is not None:
        return load_by_ids(dataset, split, ids)

    examples = load_examples(dataset, split, n=n, seed=seed, skip=skip)
    if len(examples) < n:
        after = f" after skipping {skip}" if skip else ""
        raise ValueError(f"{option} {n}: {dataset} {split} has {len(examples)} questions{after}; "
                         f"ask for at most {len(examples)}")
    return examples


def _run_locked(spec: EvalSpec, examples: list, out_dir: Path, program, retry_failed: bool,
                max_errors: int | None, question_budget: float | None) -> dict[str, Any]:
    # late: tests replace treeqa.lm.get_lm and treeqa.retrievers.get_retriever; read at call time
    from treeqa.lm import get_lm
    from treeqa.retrievers import get_retriever

    if spec.corpus:  # gold ids name the dataset's pooled paragraphs: another corpus cannot be scored on them
        examples = [ex.copy(gold_ids=[]) for ex in examples]
    lm = get_lm(spec.lm, api_base=spec.api_base, cache=spec.cache)
    inner, outer = split_threads(spec.program, spec.threads, lm)
    retriever_used = spec.resolved.needs_retriever
    if program is None:
        retriever = get_retriever(spec.dataset, spec.retriever, corpus=spec.corpus) if retriever_used else None
        program = spec.resolved.build(retriever, **({"threads": inner} if inner > 1 else {}))
    elif inner > 1 and hasattr(program, "threads"):
        program.threads = inner
    if program is not None:
        run_adapters_with(program, lm, spec.cache, spec.reader_model)
    adapter = adapter_for(lm)
    with dspy.context(lm=lm, adapter=adapter):
        result = evaluate(program, examples, lm=lm, out_path=out_dir / RECORDS_NAME, threads=outer,
                          desc=f"{spec.program} on {spec.dataset}", adapter=adapter, run_key=spec.key(),
                          retry_failed=retry_failed, max_errors=max_errors, question_budget=question_budget)
    label = spec.program + (f" ({spec.preset})" if spec.preset else "")
    gold = {ex.id: ex.get("gold_ids") or [] for ex in examples}
    judged = decisions(spec.program, result["records"], gold)
    if judged is not None:
        result["summary"]["decisions"] = judged
    after = f", after the first {spec.skip}" if spec.skip else ""
    drawn = (f"by id ({spec.sample or 'ids'}, sha256 {spec.ids_sha256[:12]})" if spec.ids is not None
             else f"seeded (seed {spec.seed}{after})")
    data = {"split": spec.split, "questions": f"{len(examples)} {drawn} from {SPLITS[spec.dataset][spec.split].path}"}
    if retriever_used:
        data["corpus"] = f"your corpus {spec.corpus!r}" if spec.corpus else corpus_description(spec.dataset)
        data["retriever"] = spec.retriever
    summary = {"summary": result["summary"], "spec": spec.model_dump(), "data": data,
               "command": recorded_command(), "versions": versions(),
               "machine": machine(engine_threads=get_settings().threads if is_embedded(lm) else None)}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    row = {label: result["summary"]}
    return {"summary": result["summary"], "out": out_dir, "records": result["records"], "data": data,
            "machine": summary["machine"], "table": markdown_table(row) + "\n\n" + seconds_table(row)}

