"""Validation EM: a program's reader answering the held-out reads of a built reader set, with or
without an adapter, so that a recipe is chosen on answers and not on loss alone.

Why: the reader set v1's adapter lowered the validation loss by 39% and was no better than rta on
retrieved passages (benchmarks/runs/lora-reader-rta-v1/NOTES.md): the loss of the gold answer's
tokens did not predict EM. Here the reader is called as the program calls it (its signature,
demos, LM adapter and, where the compiled file names one, its LoRA adapter), on the read's
question and passages as the set wrote them. Each read's outcome is appended as it is decided,
so a killed run resumes; a read whose call fails is recorded with its failure and scored 0.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import dspy
from tqdm import tqdm

from treeqa.evaluation.metrics import exact_match, f1_score
from treeqa.programs.common import safe_call
from treeqa.signatures.answer import clean_answer
from treeqa.train.reads import answer_class, records_by_id


def read_inputs(read: dict) -> dict:
    """The reader's inputs besides the question: rta's sets write `passages`, ToR's (`train
    tor-reads`) the fusion reader's own `inputs`."""
    return dict(read["inputs"]) if "inputs" in read else {"passages": list(read["passages"])}


def score_reads(reader: dspy.Module, reads: Sequence[dict], out: Path, progress: bool = True) -> list[dict]:
    """Answer every read with `reader` (its inputs as the set wrote them), appending
    one record a read to `out` (reads already there are skipped); returns the reads' records in
    their order."""
    done = records_by_id(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        for read in tqdm([r for r in reads if r["id"] not in done], desc="answering reads", unit="read",
                         disable=not progress):
            failures: list[dict] = []
            pred = safe_call(reader, failures, "answer", question=read["question"], **read_inputs(read))
            said = clean_answer(pred.answer) if pred is not None else ""
            rec = {"id": read["id"], "question_id": read["question_id"], "dataset": read["dataset"],
                   "kind": read["kind"], "gold": read["answer"], "prediction": said,
                   "em": exact_match(said, [read["answer"]]), "f1": f1_score(said, [read["answer"]]),
                   "failures": failures}
            done[read["id"]] = rec
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
    return [done[r["id"]] for r in reads]


def summarise(records: Sequence[dict]) -> dict:
    """EM and F1 (in %) over all records and by kind, dataset and answer (yes/no or other), with
    their counts and failures; on yes/no reads also what the reader said ("said"). Why by answer:
    the adapters flip the reader's yes/no prior, and a validation set and a claim sample hold
    yes/no questions in other shares and directions (benchmarks/runs/reader-v3/NOTES.md)."""
    def figures(recs: Sequence[dict]) -> dict:
        n = len(recs)
        return {"n": n, "em": round(100 * sum(r["em"] for r in recs) / n, 1) if n else None,
                "f1": round(100 * sum(r["f1"] for r in recs) / n, 1) if n else None,
                "failed": sum(1 for r in recs if r["failures"])}

    groups: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        groups[f"kind:{rec['kind']}"].append(rec)
        groups[f"dataset:{rec['dataset']}"].append(rec)
        groups["answer:yes/no" if answer_class(rec["gold"]) != "other" else "answer:other"].append(rec)
    out = {"all": figures(records), **{key: figures(recs) for key, recs in sorted(groups.items())}}
    if "answer:yes/no" in out:
        said = Counter(answer_class(r["prediction"]) for r in groups["answer:yes/no"])
        out["answer:yes/no"]["said"] = {k: said[k] for k in ("yes", "no", "other")}
    return out
