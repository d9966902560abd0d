"""Which chats a reader trains and validates on: the reads of built sets, one side at a time, or
with the reasons the model found for them (`train reasons`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from treeqa.lm import TrainableJSONAdapter
from treeqa.train.reads import hashed_order, read_set
from treeqa.train.reasons import read_reasons, reasoned_chats


def interleave(groups: Sequence[Sequence[dict]]) -> list[dict]:
    """One read of each set in turn, so the first validation reads span every set given."""
    return [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]


def train_and_validation_reads(sets: Sequence[Path], per_question: int | None = None, yes_no_built: bool = False,
                               limit: int | None = None) -> tuple[list[dict], list[dict]]:
    """The train reads of `sets` (at most `per_question` a question, and every built read of a
    yes/no question with `yes_no_built`; the first `limit` in a hashed order, a fair sample), and
    their validation reads, one a question, interleaved across the sets."""
    train = [r for folder in sets for r in read_set(folder, "train", per_question, yes_no_built)]
    train = hashed_order(train)[:limit] if limit is not None else train
    held_out = interleave([read_set(folder, "validation", 1) for folder in sets])
    return train, held_out


def training_chats(sets: Sequence[Path], train: list[dict], held_out: list[dict], with_reasons: bool = False,
                   reasoned_only: bool = False, say=lambda line: None) -> tuple[list[dict], list[dict]]:
    """The train and validation chats: the reads' own (rta's prompt), or with `with_reasons` those
    that gained a reason in the reasoning reader's prompt; `reasoned_only` keeps the reads'
    own chats of the train reads that gained one (the control). A ValueError says what is missing."""
    if not (with_reasons or reasoned_only):
        return [r["chat"] for r in train], [r["chat"] for r in held_out]
    if with_reasons and reasoned_only:
        raise ValueError("--with-reasons and --reasoned-only are the two sides of one comparison: "
                         "train one of them at a time")
    found = {k: v for folder in sets for k, v in read_reasons(Path(folder) / "reasons.jsonl").items()}
    train_chats, without = reasoned_chats(train, found, TrainableJSONAdapter())
    say(f"{len(train_chats)} train reads with a reason ({without} without, left out)")
    if not train_chats:
        raise ValueError("no read has a kept reason yet: run `treeqa train reasons` first")
    if reasoned_only:
        kept = {r["id"] for r in train if found.get(r["id"], {}).get("how", "none") != "none"}
        return [r["chat"] for r in train if r["id"] in kept], [r["chat"] for r in held_out]
    held_out_chats, _ = reasoned_chats(held_out, found, TrainableJSONAdapter())
    if not held_out_chats:
        raise ValueError("no validation read has a kept reason: run `treeqa train reasons --side "
                         "validation` for a curve")
    return train_chats, held_out_chats
