"""Reasons the model finds itself (STaR): training targets with a reasoning the reader wrote.

Why: a reader trained on bare answers learns the answer's form, not how to get there from the
passages; RAFT lost ~10 points on HotpotQA when its targets had no reasoning. Here the reasoning
reader (`ReasonFromPassages`) answers each training read; where it reaches the gold answer its
reasoning is kept ("found", what DSPy's BootstrapFinetune keeps). Where it does not, one attempt
is shown the gold answer (`ReasonTowardsAnswer`), and its reasoning is kept only if it names
the answer and does not give away that it was told ("rationalised"); it is then trained as if
unhinted. Only reads that hold every gold paragraph get that attempt (`HINTED_KINDS`).
Everything else is "none": that read trains without a reason or not at all. Each read's
outcome is appended to a JSONL file as it is decided, so a killed run resumes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import dspy
from tqdm import tqdm

from treeqa.data.answers import normalize_answer
from treeqa.evaluation.metrics import exact_match
from treeqa.programs.common import safe_call
from treeqa.signatures import budget
from treeqa.signatures.answer import ReasonFromPassages, ReasonTowardsAnswer, clean_answer
from treeqa.train.reads import records_by_id

# a rationalisation that says it was told is no reasoning the unhinted reader could have written
_GIVEN_AWAY = re.compile(r"\b(hint|given answer|correct answer|provided answer|was given|we are told the answer)\b",
                         re.IGNORECASE)


def names_answer(reasoning: str, answer: str) -> bool:
    """The reasoning arrives at the answer: every word of the answer is a word of the reasoning
    (normalised), so "no" is not found in "not" nor "Paris" in "Parisian", while "Kerr Van Cleve
    Smith" names "Kerr Smith" (a 1.5B reasoner writes a name as its passage does)."""
    target, words = normalize_answer(answer).split(), set(normalize_answer(reasoning).split())
    return bool(target) and all(word in words for word in target)


def gives_away(reasoning: str) -> bool:
    return bool(_GIVEN_AWAY.search(reasoning))


def without_giveaways(reasoning: str) -> str:
    """The reasoning less its sentences that say the answer was given ("The correct answer is
    X."): a 1.5B reasoner often opens so and then reasons from the passages; what is left is
    checked as any rationalisation."""
    sentences = re.split(r"(?<=[.!?])\s+", reasoning.strip())
    return " ".join(s for s in sentences if s and not gives_away(s))


class ReasonFinder(dspy.Module):
    """One read -> {"how": found | rationalised | none, "reasoning"}: the unhinted reasoner first,
    the hinted one only where it missed."""

    def __init__(self):
        super().__init__()
        self.reason = budget.predict(ReasonFromPassages)
        self.rationalise = budget.predict(ReasonTowardsAnswer)

    def forward(self, question: str, passages: list[str], answer: str, hint: bool = True) -> dict:
        failures: list[dict] = []  # a reply that does not parse, a timeout: that attempt yields nothing
        pred = safe_call(self.reason, failures, "reason", question=question, passages=passages)
        reasoning, said = (str(pred.reasoning or "").strip(), clean_answer(pred.answer)) if pred else ("", "")
        if reasoning and exact_match(said, [answer]):
            return {"how": "found", "reasoning": reasoning, "said": said, "failures": failures}
        if not hint:
            return {"how": "none", "reasoning": "", "said": said, "failures": failures}
        hinted = safe_call(self.rationalise, failures, "rationalise", question=question, passages=passages,
                           correct_answer=answer)
        written = str(hinted.reasoning or "").strip() if hinted else ""
        reasoning = without_giveaways(written)
        if reasoning and names_answer(reasoning, answer):
            return {"how": "rationalised", "reasoning": reasoning, "said": said, "failures": failures}
        # the refused rationalisation is kept apart (never trained on): what the checks refuse
        return {"how": "none", "reasoning": "", "said": said, "refused": written, "failures": failures}


# reads that hold every gold paragraph: only there can a reasoning shown the answer lead to it
# from the passages; on a read that misses one (missed, partial) a 1.5B reasoner shown the answer
# invents the missing fact ("X was born in 1127, which answers when his father was born")
HINTED_KINDS = frozenset({"gold", "own"})


def hinted(read: dict) -> bool:
    """Whether a read gets the hinted attempt (STaR's rationalisation): a read of a kind that
    holds every gold paragraph, or one whose kind is not recorded."""
    return read.get("kind") is None or read["kind"] in HINTED_KINDS


def find_reasons(reads: Sequence[dict], out: Path, finder: ReasonFinder | None = None,
                 progress: bool = True) -> Counter:
    """Decide every read's reason, appending one line a read to `out` (reads already there are
    skipped: a rerun resumes); returns the count of each outcome over all reads in `out`."""
    finder = finder or ReasonFinder()
    done = read_reasons(out)
    todo = [r for r in reads if r["id"] not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        for read in tqdm(todo, desc="finding reasons", unit="read", disable=not progress):
            outcome = finder(question=read["question"], passages=list(read["passages"]), answer=read["answer"],
                             hint=hinted(read))
            done[read["id"]] = outcome
            fh.write(json.dumps({"id": read["id"], **outcome}, ensure_ascii=False) + "\n")
            fh.flush()
    return Counter(done[r["id"]]["how"] for r in reads if r["id"] in done)


def read_reasons(path: Path) -> dict[str, dict]:
    """Read id -> outcome; a torn last line (a killed run) is left for the rerun to redo."""
    return {i: {"how": rec["how"], "reasoning": rec.get("reasoning", ""), "said": rec.get("said", "")}
            for i, rec in records_by_id(path).items() if "how" in rec}


def reasoned_chats(reads: Sequence[dict], reasons: dict[str, dict], adapter: dspy.Adapter) -> tuple[list[dict], int]:
    """Training chats in the reasoning reader's exact prompt, the kept reasoning and the gold answer
    as the reply, for the reads that gained a reason; also how many reads had none."""
    reader = budget.predict(ReasonFromPassages)
    chats, without = [], 0
    for read in reads:
        outcome = reasons.get(read["id"])
        if not outcome or outcome["how"] == "none":
            without += 1
            continue
        inputs = {"question": read["question"], "passages": list(read["passages"])}
        chats.append(adapter.format_finetune_data(reader.signature, reader.demos, inputs,
                                                  {"reasoning": outcome["reasoning"], "answer": read["answer"]}))
    return chats, without
