"""Fitting the trained reader's yes/no calibration, one bias a dataset (applied at read time by
`treeqa.programs.compiled.yes_no`).

The reader answers every validation read of a yes/no question (held out of its training) with
log-probabilities; its log-odds of "yes" are shifted by the bias that makes it say "yes" to the
share of those reads that the dataset's training questions answer "yes" (the prior). One number a
dataset, fitted from the reader's ranking and the training questions' answers, not from which
validation reads it got right: a bias chosen for accuracy on ten reads would be fitted to them.
Each read's answer is appended as it comes, so a killed run resumes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy
from tqdm import tqdm

from treeqa.evaluation.metrics import normalize_answer
from treeqa.evaluation.replay import NoSearch
from treeqa.judging.verdicts import LOGPROBS
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.programs.common import safe_call
from treeqa.programs.compiled import attach_adapter
from treeqa.programs.compiled.yes_no import YES_NO, log_odds, yes_probability
from treeqa.train.reads import Take, answer_class, read_set, records_by_id, take_examples
from treeqa.train.scores import read_inputs

MARGIN = 1.0  # log-odds beyond the outermost read when the prior asks for all "yes" or all "no"


def training_yes_shares(takes: Sequence[Take]) -> dict[str, dict[str, Any]]:
    """Dataset -> the yes/no training questions of `takes`: how many, how many "yes", the share."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for take in takes:
        for example in take_examples(take):
            said = answer_class(example.answers[0])
            if said != "other":
                counts[take.dataset][0] += 1
                counts[take.dataset][1] += said == "yes"
    return {d: {"questions": n, "yes": yes, "share": round(yes / n, 4)} for d, (n, yes) in sorted(counts.items())}


def fit_bias(log_odds_yes: Sequence[float], share: float) -> float:
    """The bias b for which `round(share * n)` of the n reads have log-odds + b >= 0: midway
    between the last read it makes "yes" and the first it leaves "no"."""
    if not log_odds_yes:
        raise ValueError("no yes/no read to fit a bias on")
    ranked = sorted(log_odds_yes, reverse=True)
    k = round(share * len(ranked))
    if k == 0:
        return -ranked[0] - MARGIN
    if k == len(ranked):
        return -ranked[-1] + MARGIN
    return -(ranked[k - 1] + ranked[k]) / 2


def answer_yes_no_reads(reader: dspy.Module, reads: Sequence[dict], out: Path, progress: bool = True) -> list[dict]:
    """The reader's answer and P("yes") on each read (asked with log-probabilities, as the
    calibrated reader asks), one record a read appended to `out` (reads already there skipped)."""
    done = records_by_id(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        for read in tqdm([r for r in reads if r["id"] not in done], desc="yes/no reads", unit="read",
                         disable=not progress):
            failures: list[dict] = []
            pred = safe_call(reader, failures, "answer", question=read["question"], config=LOGPROBS,
                             **read_inputs(read))
            rec = {"id": read["id"], "question_id": read["question_id"], "dataset": read["dataset"],
                   "kind": read["kind"], "gold": answer_class(read["answer"]),
                   "said": normalize_answer(pred.answer) if pred is not None else "",
                   "p_yes": yes_probability(pred) if pred is not None else None, "failures": failures}
            done[read["id"]] = rec
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
    return [done[r["id"]] for r in reads]


def fit_calibration(records: Sequence[dict], shares: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Dataset -> its bias and what it was fitted on, with the reads' "yes" share and agreement
    with gold before and after (a check on the fitting reads, not a claim). A dataset with no
    prior, or whose reads carry no probability, gets no bias."""
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        by_dataset[rec["dataset"]].append(rec)
    out: dict[str, dict[str, Any]] = {}
    for dataset, recs in sorted(by_dataset.items()):
        usable = [r for r in recs if r["p_yes"] is not None and r["said"] in YES_NO]
        if dataset not in shares or not usable:
            continue
        share = shares[dataset]["share"]
        bias = round(fit_bias([log_odds(r["p_yes"]) for r in usable], share), 4)
        after = ["yes" if log_odds(r["p_yes"]) + bias >= 0 else "no" for r in usable]
        out[dataset] = {
            "bias": bias, "prior": shares[dataset], "reads": len(usable),
            "without_probability": len(recs) - len(usable),
            "gold_yes": sum(r["gold"] == "yes" for r in usable),
            "said_yes": {"written": sum(r["said"] == "yes" for r in usable), "calibrated": after.count("yes")},
            "right": {"written": sum(r["said"] == r["gold"] for r in usable),
                      "calibrated": sum(a == r["gold"] for a, r in zip(after, usable, strict=True))}}
    return out


def set_takes(reads: Path) -> list[Take]:
    """The takes a built set's manifest records (the questions its reads came from)."""
    manifest = json.loads((Path(reads) / "manifest.json").read_text(encoding="utf-8"))
    return [Take(**{**t, "without": tuple(t["without"]) if t.get("without") else None})
            for t in manifest["settings"]["takes"]]


def fit_reader_yes_no(reader: dspy.Module, reads: Path, out: Path, progress: bool = True) -> dict[str, Any]:
    """Answer the validation reads of `reads`' yes/no questions with `reader` (into
    `out`/yes-no-reads.jsonl, resumable), fit a bias a dataset against the prior of the set's own
    training questions, and write `out`/yes-no.json. Returns what it writes."""
    chosen = [r for r in read_set(reads, "validation") if answer_class(r["answer"]) != "other"]
    if not chosen:
        raise ValueError(f"{reads}: no validation read of a yes/no question to fit a calibration on")
    records = answer_yes_no_reads(reader, chosen, Path(out) / "yes-no-reads.jsonl", progress=progress)
    shares = training_yes_shares(set_takes(reads))
    manifest = json.loads((Path(reads) / "manifest.json").read_text(encoding="utf-8"))
    result = {"datasets": fit_calibration(records, shares), "reads_sha256": manifest["reads_sha256"],
              "fitted_on": f"every validation read of a yes/no question ({len(chosen)}), held out of the training",
              "failed": sum(1 for r in records if r["failures"])}
    (Path(out) / "yes-no.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def fit_adapter_yes_no(adapter: Path, reads: Path, out: Path, progress: bool = True) -> dict[str, Any] | None:
    """`fit_reader_yes_no` for an adapter on rta's reader (the prompt the reads were written in)
    on the embedded model; None where the set holds no validation read of a yes/no question."""
    if not any(answer_class(r["answer"]) != "other" for r in read_set(reads, "validation")):
        return None
    # late: the LM door is read at call time (tests replace the engine)
    from treeqa.lm import adapter_for, get_lm

    program = RetrieveThenAnswer(NoSearch())
    attach_adapter(program, Path(adapter), [RetrieveThenAnswer.reader])
    lm = get_lm("local", cache=False)
    with dspy.context(lm=lm, adapter=adapter_for(lm)):
        return fit_reader_yes_no(dict(program.named_predictors())[RetrieveThenAnswer.reader], reads, out,
                                 progress=progress)
