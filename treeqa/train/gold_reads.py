"""Gold reads: training chats in which the reader sees a question's gold paragraphs among the
passages one retrieval returns, and answers with the gold answer (RAFT's recipe, in the exact
prompt the program's reader sends).

A program's own traces teach only the questions it already answers; a gold read teaches
reading where the evidence is there, which is what the 1.5B reader loses most often. Built
for readers that read retrieved passages the way `rta` does (`k` passages, each cut to
`passage_chars`): every gold paragraph the retrieval missed takes the place of the
lowest-ranked other passage, at a seeded random position among the k.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import dspy

from treeqa.data.corpus import Passage
from treeqa.signatures.formatting import format_passages
from treeqa.teleprompt.recorded import reader_of


def with_gold(retrieved: Sequence[Passage], gold: Sequence[Passage], k: int, rng: random.Random) -> list[Passage]:
    """The first k retrieved passages with every gold one among them (at most k gold kept)."""
    gold = list(gold)[:k]
    gold_ids = {p.id for p in gold}
    kept = list(retrieved[:k])
    missing = [p for p in gold if p.id not in {q.id for q in kept}]
    for passage in missing:
        for i in range(len(kept) - 1, -1, -1):  # drop the lowest-ranked passage that is not gold
            if kept[i].id not in gold_ids:
                del kept[i]
                break
        kept.insert(rng.randrange(len(kept) + 1), passage)
    return kept[:k]


def gold_reads(program: dspy.Module, examples: Sequence[dspy.Example], adapter: dspy.Adapter,
               seed: int = 0) -> tuple[list[dict], int]:
    """(chats, skipped): one training chat per example whose gold paragraphs are in the
    program's corpus; examples without gold paragraphs there are skipped and counted."""
    name, reader = reader_of(program)
    if "passages" not in reader.signature.input_fields or not hasattr(program, "k"):
        raise ValueError(f"{type(program).__name__}'s reader does not read retrieved passages; gold reads are "
                         "built for retrieve-then-read programs such as rta")
    retriever = program.retriever
    by_id = {p.id: p for p in retriever.passages}
    rng = random.Random(seed)
    chats, skipped = [], 0
    for example in examples:
        gold = [by_id[i] for i in example.get("gold_ids") or [] if i in by_id]
        if not gold or not example.get("answers"):
            skipped += 1
            continue
        passages = with_gold(retriever.search(example.question, program.k), gold, program.k, rng)
        inputs = {"question": example.question, "passages": format_passages(passages, program.passage_chars)}
        chats.append(adapter.format_finetune_data(reader.signature, reader.demos, inputs,
                                                  {"answer": str(example.answers[0])}))
    return chats, skipped


def chat_answer(chat: dict) -> str:
    """The trained reply's `answer` (a JSON reply), or the reply itself, lower-cased."""
    reply = chat["messages"][-1]["content"]
    try:
        parsed = json.loads(reply)
    except ValueError:
        return reply.strip().lower()
    return str(parsed.get("answer", reply) if isinstance(parsed, dict) else reply).strip().lower()


def balance_yes_no(chats: list[dict], seed: int = 0) -> tuple[list[dict], int]:
    """The chats with as many gold "yes" as gold "no" reads: surplus reads of the more frequent one
    are left out (seeded), the others keep their order. A reader trained on 35 "no" against 10
    "yes" answered "no" to 24 of 26 yes/no questions it had never seen (benchmarks/runs/
    lora-reader-rta/NOTES.md). Returns the chats kept and how many were left out."""
    yes = [i for i, chat in enumerate(chats) if chat_answer(chat) == "yes"]
    no = [i for i, chat in enumerate(chats) if chat_answer(chat) == "no"]
    larger, smaller = (yes, no) if len(yes) > len(no) else (no, yes)
    dropped = set(random.Random(seed).sample(larger, len(larger) - len(smaller)))
    return [chat for i, chat in enumerate(chats) if i not in dropped], len(dropped)
