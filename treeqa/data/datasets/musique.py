"""MuSiQue-Ans: 2-4 hop questions composed from single-hop ones, with 20 paragraphs each.

The official zip is on Google Drive, which answers a program with a confirmation page, so it is
fetched by hand and read with `treeqa data get musique --from FOLDER`. Pinned on first use.
"""

from __future__ import annotations

from collections.abc import Iterator

import dspy

from treeqa.data.corpus import text_of
from treeqa.data.loaders import Dataset, Layout, SplitFile, example, paragraph, register, register_layout, unique
from treeqa.data.passage import clean_whitespace
from treeqa.data.sources import Remote, Source, register_source

DRIVE = "https://drive.google.com/file/d/1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h/view"


def parse(rec: dict, where: str) -> dspy.Example:
    """`id, paragraphs [{idx, title, paragraph_text, is_supporting}], question,
    question_decomposition, answer, answer_aliases`."""
    answers = unique([rec["answer"], *(rec.get("answer_aliases") or [])])
    gold = [(p["title"], p["paragraph_text"]) for p in rec["paragraphs"] if p.get("is_supporting")]
    steps = [s for s in rec.get("question_decomposition") or [] if isinstance(s, dict)]
    # MuSiQue orders supporting paragraphs by their hop through the decomposition's paragraph_support_idx
    by_idx = {p.get("idx"): p for p in rec["paragraphs"]}
    hops = [by_idx[s["paragraph_support_idx"]] for s in steps if s.get("paragraph_support_idx") in by_idx]
    ordered = hops or [p for p in rec["paragraphs"] if p.get("is_supporting")]
    annotation = {"type": f"{len(steps)}hop" if steps else None,
                  "gold": [paragraph(p["title"], p["paragraph_text"], [p["paragraph_text"]]) for p in ordered],
                  "distractors": [paragraph(p["title"], p["paragraph_text"]) for p in rec["paragraphs"]
                                  if not p.get("is_supporting")],
                  "decomposition": [{"question": s.get("question", ""), "answer": s.get("answer", "")} for s in steps]}
    return example(str(rec["id"]), rec["question"], answers, gold, annotation)


def paragraphs(record: dict) -> Iterator[tuple[str, str]]:
    for p in record["paragraphs"]:
        yield text_of(p["title"], "title"), clean_whitespace(text_of(p["paragraph_text"], "paragraph_text"))


register_layout(Layout("musique", parse, paragraphs))
register(Dataset(
    "musique",
    {"train": SplitFile("musique/musique_ans_train_subset.jsonl", "musique",
                        official="musique/musique_ans_v1.0_train.jsonl"),
     "dev": SplitFile("musique/musique_ans_dev_subset.jsonl", "musique",
                      official="musique/musique_ans_v1.0_dev.jsonl")},
    eval_split="dev"))
register_source(Source(
    "musique",
    (Remote(DRIVE, {"musique_ans_v1.0_train.jsonl": "musique/musique_ans_v1.0_train.jsonl",
                    "musique_ans_v1.0_dev.jsonl": "musique/musique_ans_v1.0_dev.jsonl"},
            name="musique_v1.0.zip", unpack="zip",
            by_hand="Google Drive answers programs with a confirmation page"),),
    homepage="https://github.com/StonyBrookNLP/musique", licence="CC BY 4.0",
    size="one zip (MuSiQue-Ans and -Full, all splits)"))
