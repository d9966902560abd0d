"""ToR's fusion reader's training reads, built from its own recorded searches on training
questions, in the exact prompt of the compiled ToR whose reader is trained.

Why: the reader of a seed program reads evidence pieces (an analysis and the paragraphs it came
from), not rta's five passages, so an adapter trained on rta's reads meets another prompt there.
A recorded ToR run (`treeqa evaluate --program tor` on a train split) holds each search's tree;
`rebuild_run` turns it back into what the reader reads, as `treeqa replay` does. Per question:
- "own": what this program's reader is given from that search, where it shows every gold paragraph;
- "gold": the same pieces with each gold paragraph it lacks added as a piece of its own (no
  analysis) at a seeded place among the first ones, so the budget never cuts it;
- "partial": the own pieces where a gold paragraph is missing, for a share of those questions
  (the reader must still answer).
The set is written as `treeqa train reads` writes rta's (`reads.jsonl`, `manifest.json` with the
sha256), so `treeqa train lora --set` trains on it as it is; a claim sample's question is refused.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import dspy

from treeqa.evaluation.replay import (
    ReplayError,
    corpus_passages,
    rebuild_run,
    recorded_spec,
    recorded_trees,
    run_records,
)
from treeqa.evaluation.runs import select_examples
from treeqa.lm import TrainableJSONAdapter
from treeqa.programs.compiled import CompiledFile, load_program
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.signatures.fusion import Evidence
from treeqa.train.reads import (
    CLAIM_SAMPLES,
    ReaderSet,
    balance_yes_no,
    claim_keys,
    is_validation,
    refuse_claimed,
    write_rows,
)

TOR = TreeOfReviews.name
GOLD_AMONG_FIRST = 3  # an added gold piece goes among the first pieces: the budget cuts from the end


def shown_ids(pieces: Sequence[Evidence], fitted: int) -> set[str]:
    """The paragraph ids of the first `fitted` pieces (those the budget let through)."""
    return {p.id for piece in pieces[:fitted] for p in piece.passages}


def tor_reads_of(program, run, example: dspy.Example, by_id: dict, *, seed: int,
                 partial_share: float) -> list[tuple[str, dict]]:
    """(kind, the fusion reader's inputs) for one recorded search; none without gold or answer."""
    gold = [by_id[i] for i in example.get("gold_ids") or [] if i in by_id]
    if not gold or not example.get("answers"):
        return []
    rng = random.Random(f"{seed}:{example.id}")
    pieces, _ = program.reading(run)
    inputs = program.fuse_inputs(run.question, pieces)
    fitted = len(next(v for k, v in inputs.items() if k != "question"))
    missing = [p for p in gold if p.id not in shown_ids(pieces, fitted)]
    if not missing:
        return [("own", inputs)]
    out = []
    if rng.random() < partial_share:
        out.append(("partial", inputs))
    with_gold = list(pieces)
    for p in missing:
        with_gold.insert(rng.randrange(min(len(with_gold), GOLD_AMONG_FIRST) + 1), Evidence((p,)))
    out.append(("gold", program.fuse_inputs(run.question, with_gold)))
    return out


def build_tor_reads(runs: Sequence[Path], compiled: Path, *, seed: int = 0, partial_share: float = 0.4,
                    validation_share: float = 0.1) -> tuple[ReaderSet, dspy.Predict, dict]:
    """The reads of every recorded search in `runs` (ToR runs on training questions), read by the
    program of `compiled`; returns the set, the reader predictor and the settings."""
    found = CompiledFile.read(compiled)
    if found.program != TOR:
        raise ReplayError(f"{compiled} holds a {found.program!r} program: ToR reads are for a compiled ToR")
    program = load_program(found, expect=TOR)
    ids, texts = claim_keys()
    train, validation, counts = [], [], Counter()
    for records_dir in map(Path, runs):
        recorded = recorded_spec(records_dir)
        if (recorded.program, recorded.dataset, recorded.retriever) != (TOR, found.dataset, found.retriever):
            raise ReplayError(f"{records_dir}: a {recorded.program} run on {recorded.dataset} with "
                              f"{recorded.retriever}, not ToR's searches of {found.dataset} with {found.retriever}")
        examples = select_examples(recorded.dataset, recorded.split, recorded.n, recorded.seed, recorded.skip,
                                   ids=recorded.ids)
        refuse_claimed(examples, ids, texts)
        trees = recorded_trees(run_records(records_dir, recorded), "fuse")
        needed = {n["id"] for t in trees.values() for n in t["tree"]["nodes"] if n.get("id")}
        needed |= {i for ex in examples for i in ex.get("gold_ids") or []}
        by_id = corpus_passages(program.retriever.passages, needed)
        for example in examples:
            if example.question not in trees:
                counts["questions_without_search"] += 1
                continue
            run = rebuild_run(trees[example.question]["tree"], by_id)
            made = tor_reads_of(program, run, example, by_id, seed=seed, partial_share=partial_share)
            counts["questions"] += 1
            side = validation if is_validation(example.id, validation_share) else train
            for kind, inputs in made:
                side.append({"question_id": example.id, "dataset": recorded.dataset, "kind": kind,
                             "question": example.question, "inputs": inputs, "answer": str(example.answers[0])})
                counts[f"reads_{kind}"] += 1
    train, dropped = balance_yes_no(train, seed, answer_of=lambda r: r["answer"])
    counts.update({"train_reads": len(train), "validation_reads": len(validation), "balance_dropped": dropped,
                   "train_questions": len({r["question_id"] for r in train}),
                   "validation_questions": len({r["question_id"] for r in validation})})
    settings = {"runs": [str(r) for r in runs], "compiled": str(compiled), "seed": seed,
                "partial_share": partial_share, "validation_share": validation_share, "reader": f"{TOR}.fuse",
                "claim_samples": [list(c) for c in CLAIM_SAMPLES]}
    return ReaderSet(train, validation, dict(counts)), program.fuse, settings


def write_tor_reads(runs: Sequence[Path], compiled: Path, out: Path, **options) -> dict:
    """Build the ToR reads (`build_tor_reads`) and write them as a reader set; the manifest."""
    built, reader, settings = build_tor_reads(runs, compiled, **options)
    adapter = TrainableJSONAdapter()
    rows = []
    for side, reads in (("train", built.train), ("validation", built.validation)):
        for r in reads:
            chat = adapter.format_finetune_data(reader.signature, reader.demos, r["inputs"], {"answer": r["answer"]})
            shown = {k: v for k, v in r["inputs"].items() if k != "question"}
            rows.append({"id": f"{r['question_id']}:{r['kind']}", "question_id": r["question_id"],
                         "dataset": r["dataset"], "side": side, "kind": r["kind"], "question": r["question"],
                         "inputs": shown, "answer": r["answer"], "chat": chat})
    return write_rows(rows, Path(out), settings, built.counts)
