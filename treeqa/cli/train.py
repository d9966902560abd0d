"""treeqa train: the commands about a program's trained weights (a LoRA adapter on the embedded
reader). `train reads` builds the reader's training set, `train reasons` finds reasons for it,
`train lora` trains an adapter on it, and `train attach` puts an adapter already trained on any
compiled program's predictors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from treeqa.cli.common import app, fail, parse_params
from treeqa.evaluation.replay import NoSearch, with_reading
from treeqa.programs.compiled import (
    CompiledFile,
    CompiledProgramError,
    attach_adapter,
    load_program,
    read_recipe,
    save_compiled,
)

train_app = typer.Typer(help="A program's trained weights (LoRA adapters on the embedded model).",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")


def _source_program(source: str, dataset: str | None,
                    params: dict | None = None) -> tuple[Any, dict[str, Any], Path | None]:
    """(program, recipe, compiled file or None) of `source`: a compiled file, or a program's name
    (its zero-shot settings with `params` in place, searching `dataset`'s corpus with the default
    retriever)."""
    from treeqa.data import DEFAULT_DATASET
    from treeqa.programs import PROGRAMS, build_program
    from treeqa.retrievers import DEFAULT_KIND

    path = Path(source)
    if path.is_file() or source not in PROGRAMS:
        if not path.is_file():
            raise CompiledProgramError(f"{source}: neither a compiled file nor a program ({', '.join(PROGRAMS)})")
        found = CompiledFile.read(path)
        recipe, _ = read_recipe(path)
        return load_program(with_reading(found, params or {}), retriever=NoSearch()), recipe, path
    dataset = dataset or DEFAULT_DATASET
    recipe = {"program": source, "dataset": dataset, "retriever": DEFAULT_KIND, "params": dict(params or {}),
              "compile": {"optimizer": "none (zero-shot)"}}
    try:
        return build_program(source, NoSearch(), **(params or {})), recipe, None
    except (TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{source}: {exc}") from None


def attach_to_compiled(source: str | Path, adapter: Path, out: Path, predictors: list[str],
                       dataset: str | None = None, params: dict | None = None) -> tuple[Path, list[str]]:
    """Write `out`: the program of `source` (a compiled file, or a program's name for its zero-shot
    settings) with `adapter` on `predictors` (default: the program's own reader), the adapter
    copied beside `out` and recorded with its size and sha256 as `optimize` records one, and
    the adapter's training record (`training.json` beside it) where there is one. Returns (out,
    the predictors)."""
    program, recipe, compiled = _source_program(str(source), dataset, params)
    predictors = predictors or [type(program).reader]
    if None in predictors:
        raise CompiledProgramError(f"{source}: a {recipe['program']!r} program has no reader; name the "
                                   "predictors with --predictor")
    attach_adapter(program, adapter, predictors)
    extra = {key: recipe[key] for key in ("compile", "corpus") if key in recipe}
    extra["adapter_added"] = {"from": str(compiled) if compiled else f"{recipe['program']} (zero-shot)",
                              "adapter": adapter.name, "predictors": predictors}
    if params and compiled:
        extra["adapter_added"]["reading"] = dict(params)
    training = adapter.parent / "training.json"
    if training.is_file():
        record = json.loads(training.read_text())
        report = record.get("report") or {}
        extra["adapter_added"]["training"] = {
            "recipe": record.get("recipe"), "examples": report.get("examples"), "steps_done": report.get("steps_done"),
            "steps_total": report.get("steps_total"), "best": report.get("best"), "curve": report.get("curve")}
    path = save_compiled(program, out, name=recipe["program"], dataset=recipe["dataset"],
                         retriever=recipe.get("retriever", "dense"), preset=recipe.get("preset"),
                         params=recipe.get("params") or {}, extra=extra)
    return path, predictors


@train_app.command("attach")
def attach_cmd(
    compiled: Annotated[str, typer.Argument(help="A compiled program (compiled.json), or a program's name "
                                                 "(rta, tor, ...) for its zero-shot settings.")],
    adapter: Annotated[Path, typer.Argument(help="A LoRA adapter (.gguf) trained on the embedded model.")],
    out: Annotated[Path, typer.Argument(help="The new compiled file (.json); the adapter is copied beside it.")],
    predictor: Annotated[list[str] | None, typer.Option(help="A predictor to answer through the adapter "
                                                             "(repeat it; default: the program's reader).")]
    = None,
    dataset: Annotated[str | None, typer.Option(help="whose corpus a program named by its name searches "
                                                     "(default: hotpotqa)")] = None,
    param: Annotated[list[str] | None, typer.Option(help="a setting key=value: any of a program named by its "
                                                         "name; of a compiled file, its reading only (ToR: "
                                                         "fusion, read_top, max_context_chars, "
                                                         "max_paragraph_chars; the beam: reading). "
                                                         "fusion=passages: ToR reads in rta's prompt, which an "
                                                         "rta adapter fits; the beam's reading=passages "
                                                         "likewise")] = None,
) -> None:
    """Put a trained LoRA adapter on a program's reader (or the predictors named), saved as a new
    compiled file: a compiled program, or a zero-shot one named by its name. Nothing is trained
    and no LM is called."""
    if not adapter.is_file():
        fail(f"{adapter}: no such adapter")
    try:
        path, predictors = attach_to_compiled(compiled, adapter, out, predictor or [], dataset,
                                              parse_params(param or []))
    except CompiledProgramError as exc:
        fail(exc)
    typer.echo(f"wrote {path}: {read_recipe(path)[0]['program']} with {adapter.name} on {', '.join(predictors)}")


@train_app.command("reads")
def reads_cmd(
    out: Annotated[Path, typer.Option(help="folder for reads.jsonl and manifest.json (a rebuild overwrites "
                                           "them)")],
    k: Annotated[int, typer.Option(help="passages a read shows, as rta's k")] = 5,
    seed: Annotated[int, typer.Option(help="seeds every choice, per question")] = 0,
    partial_share: Annotated[float, typer.Option(help="share of multi-gold questions that also get a read "
                                                  "with one gold paragraph left out")] = 0.4,
    validation_share: Annotated[float, typer.Option(help="share of questions held out for validation "
                                                         "(by id hash)")] = 0.1,
    limit: Annotated[int | None, typer.Option(help="at most this many questions from each source "
                                                   "(a quick look)")] = None,
    mix: Annotated[str | None, typer.Option(help="weights by kind for drawing one read a question, e.g. "
                                                 "'own=0.4,missed=0.4,gold=0.4,partial=0.2' (own and missed "
                                                 "exclude each other); adds the missed reads (the own "
                                                 "retrieval without a gold paragraph). Default: no mix, "
                                                 "gold reads first")] = None,
    evidence: Annotated[bool, typer.Option(help="include the HotpotQA evidence questions (gold sentences "
                                                "without titles)")] = True,
    yes_no_by_dataset: Annotated[bool, typer.Option("--yes-no-by-dataset", help="balance yes/no answers within "
                                                    "each dataset, not over the whole set")] = False,
    evidence_distractors: Annotated[str, typer.Option(help="what an evidence question's gold sentences are shown "
                                                           "among: untitled sentences of the best distractor "
                                                           "paragraphs (sentences), or the titled paragraphs "
                                                           "themselves, as sets before v5 (paragraphs)")] = "sentences",
) -> None:
    """Build the reader's training set from every question we may train on (never a claim sample):
    RAFT-style reads in rta's exact prompt, yes/no balanced, its sha256 in the manifest."""
    from treeqa.teleprompt.reader_set import EVIDENCE_DISTRACTORS, TAKES, build_reader_set, parse_mix

    try:
        weights = parse_mix(mix) if mix is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--mix") from None
    if evidence_distractors not in EVIDENCE_DISTRACTORS:
        raise typer.BadParameter(" or ".join(EVIDENCE_DISTRACTORS), param_hint="--evidence-distractors")
    takes = [t for t in TAKES if evidence or t.split != "evidence"]
    manifest = build_reader_set(out, takes=takes, k=k, seed=seed, partial_share=partial_share,
                                validation_share=validation_share, limit=limit, mix=weights,
                                yes_no_by_dataset=yes_no_by_dataset, evidence_distractors=evidence_distractors)
    typer.echo(json.dumps(manifest["counts"], indent=2, sort_keys=True))
    typer.echo(f"wrote {out / 'reads.jsonl'} (sha256 {manifest['reads_sha256'][:12]}…)")


def interleave(groups: list[list[dict]]) -> list[dict]:
    """One read of each set in turn, so the first validation reads span every set given."""
    return [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]


@train_app.command("tor-reads")
def tor_reads_cmd(
    compiled: Annotated[Path, typer.Option(help="the compiled ToR whose fusion reader is trained (its prompt, "
                                                "demos and reading settings)")],
    run: Annotated[list[Path], typer.Option(help="a recorded ToR run on training questions (`treeqa evaluate "
                                                 "--program tor --split train`); repeat it")],
    out: Annotated[Path, typer.Option(help="folder for reads.jsonl and manifest.json")],
    seed: Annotated[int, typer.Option(help="seeds every choice, per question")] = 0,
    partial_share: Annotated[float, typer.Option(help="share of questions whose search missed a gold paragraph "
                                                      "that also get that read as it is")] = 0.4,
    validation_share: Annotated[float, typer.Option(help="share of questions held out for validation")] = 0.1,
) -> None:
    """Build ToR's fusion reader's training set from its own recorded searches (no LM call): each
    search as the reader reads it, and with the gold paragraphs it missed added."""
    from treeqa.evaluation.replay import ReplayError
    from treeqa.teleprompt.tor_reads import write_tor_reads

    try:
        manifest = write_tor_reads(run, compiled, out, seed=seed, partial_share=partial_share,
                                   validation_share=validation_share)
    except (ReplayError, CompiledProgramError, ValueError) as exc:
        fail(exc)
    typer.echo(json.dumps(manifest["counts"] | {"reads_sha256": manifest["reads_sha256"]}, indent=2))


@train_app.command("reasons")
def reasons_cmd(
    reads: Annotated[Path, typer.Option("--set", help="a folder `treeqa train reads` built")],
    side: Annotated[str, typer.Option(help="train, validation or both")] = "train",
    per_question: Annotated[int | None, typer.Option(help="at most this many reads a question")] = 1,
    yes_no_built: Annotated[bool, typer.Option("--yes-no-built", help="also every built read of a yes/no "
                                               "question, as `train lora --yes-no-built` trains on")] = False,
    limit: Annotated[int | None, typer.Option(help="the first N reads only, in an order by a hash of their ids "
                                                   "(a fair sample of the set; a larger N keeps the first)")] = None,
    lm: Annotated[str, typer.Option(help="the model that reasons (the one being trained)")] = "local",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ask the model again")] = False,
) -> None:
    """Find reasons the model writes itself (STaR) for the set's reads, into SET/reasons.jsonl;
    a rerun resumes. Prints how many reads gained a kept reason."""
    import dspy

    from treeqa.lm import adapter_for, get_lm
    from treeqa.teleprompt.reader_set import hashed_order, read_set
    from treeqa.teleprompt.reasons import find_reasons

    chosen = hashed_order(read_set(reads, None if side == "both" else side, per_question, yes_no_built))[:limit]
    model = get_lm(lm, cache=not no_cache)
    with dspy.context(lm=model, adapter=adapter_for(model)):
        counts = find_reasons(chosen, reads / "reasons.jsonl")
    kept = counts["found"] + counts["rationalised"]
    typer.echo(json.dumps({"reads": len(chosen), **counts, "kept": kept}, sort_keys=True))


@train_app.command("score")
def score_cmd(
    source: Annotated[str, typer.Argument(help="A compiled program (with its adapter, if it names one), or a "
                                               "program's name for its zero-shot reader.")],
    reads: Annotated[Path, typer.Option("--set", help="a folder `treeqa train reads` built")],
    out: Annotated[Path, typer.Option(help="the scores file (.jsonl, one record a read); a rerun resumes")],
    side: Annotated[str, typer.Option(help="validation, train or both")] = "validation",
    kind: Annotated[list[str] | None, typer.Option(help="only reads of this kind (repeat it; own, missed, gold, "
                                                        "partial); default: every kind")] = None,
    per_question: Annotated[int | None, typer.Option(help="at most this many reads a question")] = None,
    limit: Annotated[int | None, typer.Option(help="the first N reads only")] = None,
    lm: Annotated[str, typer.Option(help="the model the reader answers with")] = "local",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ask the model again")] = False,
) -> None:
    """Validation EM: the program's reader (and its adapter) answering a built set's held-out
    reads, as the program calls it. Prints EM and F1, overall and by kind and dataset."""
    import dspy

    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs.compiled.adapters import run_adapters_with
    from treeqa.teleprompt.read_scores import score_reads, summarise
    from treeqa.teleprompt.reader_set import KINDS, read_set
    from treeqa.teleprompt.recorded import reader_of

    if side not in ("validation", "train", "both"):
        raise typer.BadParameter("validation, train or both", param_hint="--side")
    if unknown := set(kind or []) - set(KINDS):
        raise typer.BadParameter(f"unknown kind(s) {sorted(unknown)}; kinds: {', '.join(KINDS)}", param_hint="--kind")
    chosen = [r for r in read_set(reads, None if side == "both" else side, per_question)
              if not kind or r["kind"] in kind][:limit]
    if not chosen:
        fail(f"{reads}: no {side} read of the kinds asked for")
    try:
        program, _, _ = _source_program(source, None)
        _, reader = reader_of(program)
    except (CompiledProgramError, ValueError) as exc:
        fail(exc)
    model = get_lm(lm, cache=not no_cache)
    try:
        run_adapters_with(program, model, cache=not no_cache)
    except ValueError as exc:
        fail(exc)
    with dspy.context(lm=model, adapter=adapter_for(model)):
        records = score_reads(reader, chosen, out)
    typer.echo(json.dumps(summarise(records), indent=2))


def _train_resumably(chats: list[dict], out: Path, recipe, **options):
    """`train_adapter`, with a stop by Ctrl-C or SIGTERM told in one line (exit 130), not a traceback."""
    from treeqa.lm.provider import train_adapter

    try:
        return train_adapter(chats, out, recipe, **options)
    except KeyboardInterrupt:
        typer.echo(f"stopped: the same command resumes from the checkpoint in {out}", err=True)
        raise typer.Exit(130) from None


def _chats(sets: list[Path], train: list[dict], held_out: list[dict], with_reasons: bool,
           reasoned_only: bool) -> tuple[list[dict], list[dict]]:
    """The train and validation chats: the reads' own (rta's prompt), or with `with_reasons` those
    that gained a reason in the reasoning reader's prompt; `reasoned_only` keeps the reads'
    own chats of the train reads that gained one (the control)."""
    if not (with_reasons or reasoned_only):
        return [r["chat"] for r in train], [r["chat"] for r in held_out]
    if with_reasons and reasoned_only:
        raise typer.BadParameter("--with-reasons and --reasoned-only are the two sides of one comparison: "
                                 "train one of them at a time")
    from treeqa.lm import TrainableJSONAdapter
    from treeqa.teleprompt.reasons import read_reasons, reasoned_chats

    flag = "--with-reasons" if with_reasons else "--reasoned-only"
    found = {k: v for folder in sets for k, v in read_reasons(folder / "reasons.jsonl").items()}
    train_chats, without = reasoned_chats(train, found, TrainableJSONAdapter())
    typer.echo(f"{len(train_chats)} train reads with a reason ({without} without, left out)", err=True)
    if not train_chats:
        raise typer.BadParameter("no read has a kept reason yet: run `treeqa train reasons` first", param_hint=flag)
    if reasoned_only:
        kept = {r["id"] for r in train if found.get(r["id"], {}).get("how", "none") != "none"}
        return [r["chat"] for r in train if r["id"] in kept], [r["chat"] for r in held_out]
    held_out_chats, _ = reasoned_chats(held_out, found, TrainableJSONAdapter())
    if not held_out_chats:
        raise typer.BadParameter("no validation read has a kept reason: run `treeqa train reasons --side "
                                 "validation` for a curve", param_hint=flag)
    return train_chats, held_out_chats


@train_app.command("lora")
def lora_cmd(
    reads: Annotated[list[Path], typer.Option("--set", help="a folder `treeqa train reads` or `train tor-reads` "
                                                            "built; repeat it to train on several sets")],
    out: Annotated[Path, typer.Option(help="the training's folder: checkpoints, curve.json, adapter.gguf; "
                                       "a rerun with the same reads and recipe resumes")],
    per_question: Annotated[int | None, typer.Option(help="train on at most this many reads a question")] = None,
    yes_no_built: Annotated[bool, typer.Option("--yes-no-built", help="also train on every built read (gold, "
                                               "partial) of a yes/no question, beyond --per-question")] = False,
    limit: Annotated[int | None, typer.Option(help="train on the first N of those reads in an order by a hash "
                                                   "of their ids: a fair sample (a recipe comparison's runs)")] = None,
    validation_reads: Annotated[int, typer.Option(help="validation reads measured at each point (the first)")] = 64,
    validate_every: Annotated[int, typer.Option(help="examples between validation points")] = 256,
    top_layers: Annotated[int, typer.Option(help="decoder layers that carry LoRA")] = 8,
    rank: Annotated[int, typer.Option()] = 16,
    alpha: Annotated[float, typer.Option()] = 32.0,
    learning_rate: Annotated[float, typer.Option()] = 2e-4,
    epochs: Annotated[int, typer.Option()] = 1,
    accumulate: Annotated[int, typer.Option(help="examples per optimizer step")] = 4,
    max_tokens: Annotated[int, typer.Option(help="a read longer than this (prompt and answer) is skipped and "
                                                 "counted, never cut; ToR's reads run to ~3,000")] = 2048,
    lower_dtype: Annotated[str, typer.Option(help="dtype of the frozen lower layers' single pass: float32, "
                                                  "bfloat16, or auto (bfloat16 where the CPU has BF16)")] = "auto",
    top_dtype: Annotated[str, typer.Option(help="what the trained layers compute in: float32, bfloat16 "
                                                "(autocast; the weights stay float32), or auto")] = "float32",
    budget_s: Annotated[float | None, typer.Option(help="stop (checkpointed) after this many seconds; Ctrl-C "
                                                        "or SIGTERM stops after the current example")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, or auto (cuda where torch sees one)")] = "auto",
    with_reasons: Annotated[bool, typer.Option("--with-reasons", help="train the reasoning reader (rta "
                                               "--param reason=true) on the reads that gained a reason "
                                               "(`treeqa train reasons`)")] = False,
    reasoned_only: Annotated[bool, typer.Option("--reasoned-only", help="train rta's reader (bare answers) on "
                                                "the same reads as --with-reasons: what the reasons add")] = False,
) -> None:
    """Train a LoRA reader on a built set, with a validation curve; the adapter is the best point."""
    from treeqa.lm.lora import LoraRecipe, native_bf16
    from treeqa.teleprompt.reader_set import hashed_order, read_set

    train = [r for folder in reads for r in read_set(folder, "train", per_question, yes_no_built)]
    train = hashed_order(train)[:limit] if limit is not None else train
    held_out = interleave([read_set(folder, "validation", 1) for folder in reads])
    train_chats, held_out_chats = _chats(reads, train, held_out, with_reasons, reasoned_only)
    held_out_chats = held_out_chats[:validation_reads]
    fast = "bfloat16" if native_bf16() else "float32"
    lower_dtype, top_dtype = (fast if d == "auto" else d for d in (lower_dtype, top_dtype))
    try:
        recipe = LoraRecipe(rank=rank, alpha=alpha, top_layers=top_layers, learning_rate=learning_rate,
                            epochs=epochs, accumulate=accumulate, max_tokens=max_tokens, lower_dtype=lower_dtype,
                            top_dtype=top_dtype)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(f"training on {len(train_chats)} reads, validating on {len(held_out_chats)}", err=True)
    adapter, report = _train_resumably(train_chats, out, recipe, budget_s=budget_s, validation=held_out_chats,
                                       validate_every=validate_every, device=device)
    typer.echo(json.dumps({"adapter": str(adapter), "report": report.to_dict()}, indent=2))
