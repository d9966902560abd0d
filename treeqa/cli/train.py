"""treeqa train: the commands about a program's trained weights (a LoRA adapter on the embedded
reader). `train reads` builds the reader's training set, `train reasons` finds reasons for it,
`train lora` trains an adapter on it, and `train attach` puts an adapter already trained on any
compiled program's predictors. The work is `treeqa.train`'s; these commands parse options over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import dspy
import typer

from treeqa.cli.common import ApiBaseOption, ApiKeyOption, ReaderModelOption, app, fail, one_line_errors, parse_params
from treeqa.evaluation.replay import ReplayError
from treeqa.lm import adapter_for
from treeqa.lm.adapter_check import AdapterError
from treeqa.lm.lora import LoraRecipe
from treeqa.lm.peft_export import write_peft
from treeqa.programs.compiled import CompiledProgramError, read_recipe
from treeqa.programs.compiled.adapters import run_adapters_with
from treeqa.teleprompt.recorded import reader_of
from treeqa.train import outputs
from treeqa.train.attach import attach_to_compiled, source_program
from treeqa.train.chats import train_and_validation_reads, training_chats
from treeqa.train.reader import train_reader
from treeqa.train.reads import EVIDENCE_DISTRACTORS, KINDS, TAKES, build_reader_set, hashed_order, parse_mix, read_set
from treeqa.train.reasons import find_reasons
from treeqa.train.scores import score_reads, summarise
from treeqa.train.tor_reads import write_tor_reads
from treeqa.train.yes_no import fit_reader_yes_no

train_app = typer.Typer(help="A program's trained weights (LoRA adapters on the embedded model).",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")


def claimed(out: Path, writes: tuple[str, ...], ours, command: str) -> None:
    """`outputs.claim_folder`, its refusal told in one line."""
    try:
        outputs.claim_folder(out, writes, ours, command)
    except ValueError as exc:
        fail(exc)


@train_app.command("attach")
@one_line_errors
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
        outputs.claim_file(out, outputs.is_compiled_file, "a compiled program (.json)")
    except ValueError as exc:
        fail(exc)
    try:
        path, predictors = attach_to_compiled(compiled, adapter, out, predictor or [], dataset,
                                              parse_params(param or []))
    except CompiledProgramError as exc:
        fail(exc)
    typer.echo(f"wrote {path}: {read_recipe(path)[0]['program']} with {adapter.name} on {', '.join(predictors)}")


@train_app.command("reads")
@one_line_errors
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
    yes_no_by_template: Annotated[bool, typer.Option("--yes-no-by-template", help="balance yes/no answers within "
                                                     "each dataset and question template (implies "
                                                     "--yes-no-by-dataset)")] = False,
    evidence_distractors: Annotated[str, typer.Option(help="what an evidence question's gold sentences are shown "
                                                           "among: untitled sentences of the best distractor "
                                                           "paragraphs (sentences), or the titled paragraphs "
                                                           "themselves, as sets before v5 (paragraphs)")] = "sentences",
) -> None:
    """Build the reader's training set from every question we may train on (never a claim sample):
    RAFT-style reads in rta's exact prompt, yes/no balanced, its sha256 in the manifest."""
    try:
        weights = parse_mix(mix) if mix is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--mix") from None
    claimed(out, outputs.READS_FILES, outputs.reads_folder_is_ours, "treeqa train reads")
    if evidence_distractors not in EVIDENCE_DISTRACTORS:
        raise typer.BadParameter(" or ".join(EVIDENCE_DISTRACTORS), param_hint="--evidence-distractors")
    takes = [t for t in TAKES if evidence or t.split != "evidence"]
    manifest = build_reader_set(out, takes=takes, k=k, seed=seed, partial_share=partial_share,
                                validation_share=validation_share, limit=limit, mix=weights,
                                yes_no_by_dataset=yes_no_by_dataset, yes_no_by_template=yes_no_by_template,
                                evidence_distractors=evidence_distractors)
    typer.echo(json.dumps(manifest["counts"], indent=2, sort_keys=True))
    typer.echo(f"wrote {out / 'reads.jsonl'} (sha256 {manifest['reads_sha256'][:12]}…)")


@train_app.command("tor-reads")
@one_line_errors
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
    claimed(out, outputs.READS_FILES, outputs.reads_folder_is_ours, "treeqa train tor-reads")
    try:
        manifest = write_tor_reads(run, compiled, out, seed=seed, partial_share=partial_share,
                                   validation_share=validation_share)
    except (ReplayError, CompiledProgramError, ValueError) as exc:
        fail(exc)
    typer.echo(json.dumps(manifest["counts"] | {"reads_sha256": manifest["reads_sha256"]}, indent=2))


@train_app.command("reasons")
@one_line_errors
def reasons_cmd(
    reads: Annotated[Path, typer.Option("--set", help="a folder `treeqa train reads` built")],
    side: Annotated[str, typer.Option(help="train, validation or both")] = "train",
    per_question: Annotated[int | None, typer.Option(help="at most this many reads a question")] = 1,
    yes_no_built: Annotated[bool, typer.Option("--yes-no-built", help="also every built read of a yes/no "
                                               "question, as `train lora --yes-no-built` trains on")] = False,
    limit: Annotated[int | None, typer.Option(help="the first N reads only, in an order by a hash of their ids "
                                                   "(a fair sample of the set; a larger N keeps the first)")] = None,
    lm: Annotated[str, typer.Option(help="the model that reasons (the one being trained)")] = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ask the model again")] = False,
) -> None:
    """Find reasons the model writes itself (STaR) for the set's reads, into SET/reasons.jsonl;
    a rerun resumes. Prints how many reads gained a kept reason."""
    # late: tests replace treeqa.lm.get_lm, so it is read at call time
    from treeqa.lm import get_lm

    chosen = hashed_order(read_set(reads, None if side == "both" else side, per_question, yes_no_built))[:limit]
    model = get_lm(lm, api_base=api_base, api_key=api_key, cache=not no_cache)
    with dspy.context(lm=model, adapter=adapter_for(model)):
        counts = find_reasons(chosen, reads / "reasons.jsonl")
    kept = counts["found"] + counts["rationalised"]
    typer.echo(json.dumps({"reads": len(chosen), **counts, "kept": kept}, sort_keys=True))


@train_app.command("score")
@one_line_errors
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
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    reader_model: ReaderModelOption = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ask the model again")] = False,
) -> None:
    """Validation EM: the program's reader (and its adapter) answering a built set's held-out
    reads, as the program calls it. Prints EM and F1, overall and by kind and dataset."""
    # late: tests replace treeqa.lm.get_lm, so it is read at call time
    from treeqa.lm import get_lm

    if side not in ("validation", "train", "both"):
        raise typer.BadParameter("validation, train or both", param_hint="--side")
    if unknown := set(kind or []) - set(KINDS):
        raise typer.BadParameter(f"unknown kind(s) {sorted(unknown)}; kinds: {', '.join(KINDS)}", param_hint="--kind")
    try:
        outputs.claim_file(out, outputs.is_scores_file, "a scores file of `treeqa train score` (resumed)")
    except ValueError as exc:
        fail(exc)
    chosen = [r for r in read_set(reads, None if side == "both" else side, per_question)
              if not kind or r["kind"] in kind][:limit]
    if not chosen:
        fail(f"{reads}: no {side} read of the kinds asked for")
    try:
        program, _, _ = source_program(source, None)
        _, reader = reader_of(program)
    except (CompiledProgramError, ValueError) as exc:
        fail(exc)
    model = get_lm(lm, api_base=api_base, api_key=api_key, cache=not no_cache)
    try:
        run_adapters_with(program, model, cache=not no_cache, reader_model=reader_model)
    except ValueError as exc:
        fail(exc)
    with dspy.context(lm=model, adapter=adapter_for(model)):
        records = score_reads(reader, chosen, out)
    typer.echo(json.dumps(summarise(records), indent=2))


@train_app.command("yes-no")
@one_line_errors
def yes_no_cmd(
    source: Annotated[str, typer.Argument(help="A compiled program with the trained reader's adapter (e.g. "
                                               "`train attach rta ADAPTER FILE`).")],
    reads: Annotated[Path, typer.Option("--set", help="the folder `treeqa train reads` built the adapter's reads in")],
    out: Annotated[Path, typer.Option(help="a folder: yes-no-reads.jsonl (one record a read; a rerun resumes) "
                                           "and yes-no.json")],
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ask the model again")] = False,
) -> None:
    """Fit the trained reader's yes/no calibration: its P("yes") on every validation read of a
    yes/no question, and one bias a dataset that makes its "yes" share that of the set's training
    questions (`treeqa.train.yes_no`). Prints the fit."""
    # late: tests replace treeqa.lm.get_lm, so it is read at call time
    from treeqa.lm import get_lm

    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file; give a folder")
    try:
        program, _, _ = source_program(source, None)
        _, reader = reader_of(program)
    except (CompiledProgramError, ValueError) as exc:
        fail(exc)
    model = get_lm("local", cache=not no_cache)
    run_adapters_with(program, model, cache=not no_cache)
    out.mkdir(parents=True, exist_ok=True)
    with dspy.context(lm=model, adapter=adapter_for(model)):
        try:
            result = fit_reader_yes_no(reader, reads, out)
        except (FileNotFoundError, ValueError) as exc:
            fail(exc)
    typer.echo(json.dumps(result, indent=2))


def _train_resumably(chats: list[dict], out: Path, recipe, **options):
    """`train_adapter`, with a stop by Ctrl-C or SIGTERM told in one line (exit 130), not a traceback."""
    # late: tests replace treeqa.lm.provider.train_adapter, so it is read at call time
    from treeqa.lm.provider import train_adapter

    try:
        return train_adapter(chats, out, recipe, **options)
    except KeyboardInterrupt:
        typer.echo(f"stopped: the same command resumes from the checkpoint in {out}", err=True)
        raise typer.Exit(130) from None


@train_app.command("lora")
@one_line_errors
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
    top_layers: Annotated[int, typer.Option(help="decoder layers that carry LoRA")] = LoraRecipe.top_layers,
    rank: Annotated[int, typer.Option()] = LoraRecipe.rank,
    alpha: Annotated[float, typer.Option()] = LoraRecipe.alpha,
    learning_rate: Annotated[float, typer.Option()] = LoraRecipe.learning_rate,
    epochs: Annotated[int, typer.Option()] = LoraRecipe.epochs,
    accumulate: Annotated[int, typer.Option(help="examples per optimizer step")] = LoraRecipe.accumulate,
    max_tokens: Annotated[int, typer.Option(help="a read longer than this (prompt and answer) is skipped and "
                                                 "counted, never cut; ToR's reads run to ~3,000")]
    = LoraRecipe.max_tokens,
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
    """Train a LoRA reader on a built set, with a validation curve; the adapter is the best point.
    The recipe's defaults are the one recipe's (`LoraRecipe`), which the recipe comparison chose."""
    # late: tests replace treeqa.lm.lora.native_bf16, so it is read at call time
    from treeqa.lm.lora import native_bf16

    claimed(out, outputs.LORA_FILES, outputs.lora_folder_is_ours, "treeqa train lora")
    train, held_out = train_and_validation_reads(reads, per_question, yes_no_built, limit)
    try:
        train_chats, held_out_chats = training_chats(reads, train, held_out, with_reasons, reasoned_only,
                                                     say=lambda line: typer.echo(line, err=True))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--with-reasons" if with_reasons else "--reasoned-only") from None
    held_out_chats = held_out_chats[:validation_reads]
    fast = "bfloat16" if native_bf16() else "float32"
    lower_dtype, top_dtype = (fast if d == "auto" else d for d in (lower_dtype, top_dtype))
    recipe = LoraRecipe(rank=rank, alpha=alpha, top_layers=top_layers, learning_rate=learning_rate, epochs=epochs,
                        accumulate=accumulate, max_tokens=max_tokens, lower_dtype=lower_dtype, top_dtype=top_dtype)
    typer.echo(f"training on {len(train_chats)} reads, validating on {len(held_out_chats)}", err=True)
    adapter, report = _train_resumably(train_chats, out, recipe, budget_s=budget_s, validation=held_out_chats,
                                       validate_every=validate_every, device=device)
    typer.echo(json.dumps({"adapter": str(adapter), "report": report.to_dict()}, indent=2))


@train_app.command("reader")
@one_line_errors
def reader_cmd(
    out: Annotated[Path, typer.Option(help="the training's folder: reads/, lora/ and reader.json; a rerun resumes")],
    budget_s: Annotated[float | None, typer.Option(help="stop (checkpointed) after this many seconds")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, or auto (cuda where torch sees one)")] = "auto",
) -> None:
    """The whole road in one command, with the choices validation made (`treeqa.train.reader`):
    the reads of every question we may train on, the LoRA reader trained on them, reader.json.
    This is what the trained-reader compiler runs, and how the released reader was trained."""
    claimed(out, outputs.READER_FILES, outputs.reader_folder_is_ours, "treeqa train reader")
    try:
        record = train_reader(out, budget_s=budget_s, device=device, say=lambda line: typer.echo(line, err=True))
    except KeyboardInterrupt:
        typer.echo(f"stopped: the same command resumes from the checkpoint in {out / 'lora'}", err=True)
        raise typer.Exit(130) from None
    typer.echo(json.dumps({k: record[k] for k in ("reads", "adapter", "base_sha256")} |
                          {"best": record["training"].get("best")}, indent=2))


@train_app.command("peft")
@one_line_errors
def peft_cmd(
    adapter: Annotated[Path, typer.Argument(help="A LoRA adapter (.gguf), e.g. treeqa/train/released/adapter.gguf "
                                                 "or the one beside a compiled file.")],
    out: Annotated[Path, typer.Argument(help="The folder for adapter_config.json and adapter_model.safetensors.")],
) -> None:
    """Write an adapter in PEFT's form, for a server that loads LoRA that way (vLLM: --enable-lora
    --lora-modules NAME=OUT); llama.cpp's server takes the .gguf itself (--lora)."""
    if not adapter.is_file():
        fail(f"{adapter}: no such adapter")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        fail(f"{out}: give a new or empty folder (nothing is written over)")
    try:
        folder = write_peft(adapter, out)
    except AdapterError as exc:
        fail(exc)
    typer.echo(f"wrote {folder / 'adapter_config.json'} and {folder / 'adapter_model.safetensors'}")
