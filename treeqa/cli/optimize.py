"""treeqa optimize (and python optimize.py): compile on train, zero-shot vs compiled on dev."""

from __future__ import annotations

from typing import Annotated

import typer

from treeqa.cli.common import (
    PRESET_LIST,
    PROGRAM_NAMES,
    ApiBaseOption,
    ApiKeyOption,
    ConcurrencyOption,
    CorpusOption,
    KindOption,
    LmOption,
    OldThreadsOption,
    ReaderModelOption,
    SpecDefaults,
    app,
    fail,
    parse_params,
)
from treeqa.data.loaders import DATASETS
from treeqa.data.samples import selection
from treeqa.evaluation.loop import RunAborted
from treeqa.optimize import OptimizeSpec, optimizer_names, run_optimize
from treeqa.optimize.spec import splits_for
from treeqa.programs.compiled import CompiledProgramError

OPT = SpecDefaults(OptimizeSpec)


OptimizerOption = Annotated[str | None, typer.Option(help=f"One of {', '.join(optimizer_names())}, or a preparer "
                                                         "and an EM teleprompter joined by '+' (default: the "
                                                         "program's own default compile: path-judge+released-settings+"
                                                         "trained-reader for tor, path-judge+trained-reader for "
                                                         "beam, else bootstrap).")]
TrainOption = Annotated[int | None, typer.Option(help="Training questions to compile on (default: with the program's "
                                                      "default compile, its size (tor, beam: 100), else 20).")]
TrainFromOption = Annotated[str | None, typer.Option(help="Compile on this dataset's train split instead (e.g. "
                                                          "musique's decompositions for the beam on nq); only "
                                                          "compilers that learn from annotations alone.")]
DevOption = Annotated[int | None, typer.Option("--n", "--dev", help="Questions to evaluate on (seeded sample of the "
                                                                    f"dev split), zero-shot and compiled [default: "
                                                                    f"{OPT.dev}].", show_default=False)]
SampleOption = Annotated[str | None, typer.Option("--sample", help="The dev questions by a committed sample's name "
                                                                   "(treeqa/data/samples/index.json), exactly its "
                                                                   "ids in order.", show_default=False)]
IdsOption = Annotated[str | None, typer.Option("--ids", help="The dev questions by a file of ids, one a line.",
                                               show_default=False)]
TrainSampleOption = Annotated[str | None, typer.Option("--train-sample", help="The train questions by a committed "
                                                                              "sample's name.", show_default=False)]
TrainIdsOption = Annotated[str | None, typer.Option("--train-ids", help="The train questions by a file of ids, one "
                                                                        "a line.", show_default=False)]
SkipOption = Annotated[int, typer.Option(help="Leave out the first SKIP dev questions of the seeded order (a sample "
                                              "already examined), taking the next DEV.")]
TeacherOption = Annotated[str | None, typer.Option(help="LM that bootstraps demos / proposes instructions.")]
PresetOption = Annotated[str | None, typer.Option(help=f"beam only: the paper's settings, one of {PRESET_LIST}.")]
ParamOption = Annotated[list[str], typer.Option(help="Program hyperparameter key=value (repeatable), e.g. depth=2, "
                                                     "widths=[5,3,3], expansion=mpc.")]
AnnotatedOption = Annotated[int, typer.Option(help="Demos per predictor built from the training annotations "
                                                   "(--optimizer annotated).")]
CacheOption = Annotated[bool, typer.Option(help="Let the two evaluations use DSPy's response cache (--no-cache: "
                                                "their costs are real).")]
ZeroShotFromOption = Annotated[str | None, typer.Option(help="A run folder of the same zero-shot spec (e.g. a "
                                                             "reference run) whose records the zero-shot side "
                                                             "starts from.")]
ReplayOption = Annotated[str | None, typer.Option(help="A ToR run of the same dev questions whose recorded searches "
                                                       "the compiled side reads (treeqa replay): for a compile "
                                                       "that changes only the reading.")]
ZeroShotOption = Annotated[bool, typer.Option(help="Evaluate the zero-shot program too (--no-zero-shot: the compiled "
                                                   "side alone, when its baseline is measured elsewhere; running "
                                                   "again without it adds the side).")]
ReaderOption = Annotated[str, typer.Option(help="The trained reader of ToR's and the beam's default compile "
                                               "(--optimizer trained-reader): released (the adapter shipped with "
                                               "treeqa, when its record fits), train (train one in this run: hours "
                                               "on 2 cores, resumable), or none (the paper's reader).")]

FromOption = Annotated[str | None, typer.Option("--from", help="A compiled file (compiled.json) to compile further: "
                                                             "the stages run on its program (e.g. --from judged.json "
                                                             "--optimizer trained-reader).")]
CostOption = Annotated[float | None, typer.Option(help="--optimizer settings: keep only settings whose seconds a "
                                                        "question are at most this many times rta's, both measured "
                                                        "on the train questions in this run (e.g. 2).")]
AgainstOption = Annotated[str | None, typer.Option(help="Also run this program zero-shot on the same questions and "
                                                        "pair each side with it (make demo: rta).")]


@app.command("optimize")
def optimize_cmd(
    program: Annotated[str, typer.Option(help=f"One of {PROGRAM_NAMES}.")] = OPT.program,
    dataset: Annotated[str | None, typer.Option(help=f"One of {', '.join(DATASETS)} [default: {OPT.dataset}, or "
                                                      "the --sample's].", show_default=False)] = None,
    optimizer: OptimizerOption = None,
    train: TrainOption = None,
    train_from: TrainFromOption = None,
    dev: DevOption = None,
    skip: SkipOption = OPT.skip,
    sample_name: SampleOption = None,
    ids: IdsOption = None,
    train_sample: TrainSampleOption = None,
    train_ids: TrainIdsOption = None,
    seed: Annotated[int, typer.Option(help="Sampling and optimizer seed.")] = OPT.seed,
    lm: LmOption = "local",
    api_base: ApiBaseOption = None,
    api_key: ApiKeyOption = None,
    teacher_lm: TeacherOption = None,
    retriever: KindOption = OPT.retriever,
    corpus: CorpusOption = None,
    concurrency: ConcurrencyOption = 1,
    threads: OldThreadsOption = None,
    out: Annotated[str | None, typer.Option(help="Output folder (default under runs/optimize/).")] = None,
    preset: PresetOption = None,
    param: ParamOption = [],
    max_demos: Annotated[int, typer.Option(help="Bootstrapped demos per predictor.")] = OPT.max_demos,
    candidates: Annotated[int, typer.Option(help="Candidate programs / instructions (search optimizers).")] = (
        OPT.candidates),
    trials: Annotated[int, typer.Option(help="MIPROv2 trials.")] = OPT.trials,
    metric_calls: Annotated[int, typer.Option(help="GEPA's budget of metric calls.")] = OPT.metric_calls,
    annotated_demos: AnnotatedOption = OPT.annotated_demos,
    plan: Annotated[bool, typer.Option("--plan", help="Print the LM-call budget and exit.")] = False,
    cache: CacheOption = OPT.cache,
    zero_shot_from: ZeroShotFromOption = None,
    replay_from: ReplayOption = None,
    zero_shot: ZeroShotOption = OPT.zero_shot,
    reader: ReaderOption = OPT.reader,
    reader_model: ReaderModelOption = None,
    start_from: FromOption = None,
    against: AgainstOption = None,
    max_cost_ratio: CostOption = None,
) -> None:
    """Compile a program on train against exact match; evaluate zero-shot and compiled on dev."""
    try:
        dataset, asked = _questions_by_id(dataset, train_from, dev, train, sample_name, ids, train_sample, train_ids)
        spec = OptimizeSpec(program=program, dataset=dataset, optimizer=optimizer, train_from=train_from, **asked,
                            seed=seed, skip=skip, lm=lm, api_base=api_base, teacher_lm=teacher_lm, retriever=retriever,
                            corpus=corpus, threads=threads or concurrency, preset=preset, params=parse_params(param),
                            max_demos=max_demos, candidates=candidates, trials=trials, metric_calls=metric_calls,
                            annotated_demos=annotated_demos, cache=cache, zero_shot_from=zero_shot_from,
                            replay_from=replay_from, zero_shot=zero_shot, reader=reader, reader_model=reader_model,
                            against=against, start_from=start_from,
                            max_cost_ratio=max_cost_ratio)
        typer.echo(spec.default_compile_note) if spec.default_compile_note else None  # said, not done silently
        run_optimize(spec, out, plan_only=plan, echo=typer.echo)
    except (ValueError, FileNotFoundError, CompiledProgramError, RunAborted) as exc:
        fail(exc)



def _questions_by_id(dataset, train_from, dev, train, sample_name, ids, train_sample, train_ids) -> tuple[str, dict]:
    """(dataset, the spec's sizes and ids): each side's questions by a committed sample or an id
    file where given (a sample's dataset and split must be the side's), else seeded."""
    dev_chosen = selection(sample_name, ids, dataset, None)
    dataset = dataset or (dev_chosen.dataset if dev_chosen and dev_chosen.dataset else OPT.dataset)
    train_dataset = train_from or dataset
    train_chosen = selection(train_sample, train_ids, train_dataset, None, option="--train-sample")
    asked = {"dev": OPT.dev if dev is None else dev, "train": train}
    for side, chosen, split, option in (("dev", dev_chosen, splits_for(dataset)[1], "--sample"),
                                        ("train", train_chosen, splits_for(train_dataset)[0], "--train-sample")):
        if chosen is None:
            continue
        if chosen.split not in (None, split):
            raise ValueError(f"{option} {chosen.name} is {chosen.dataset} {chosen.split}: the {side} side asks "
                             f"{split} questions")
        size = dev if side == "dev" else train
        asked[side] = len(chosen.ids) if size is None else size
        prefix = "" if side == "dev" else "train_"
        asked |= {f"{prefix}ids": chosen.ids, f"{prefix}sample": chosen.name}
    return dataset, asked
