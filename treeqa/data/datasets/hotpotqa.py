"""HotpotQA (distractor setting): multi-hop questions over ten Wikipedia paragraphs each.

Its layout, `hotpot`, is also 2WikiMultihopQA's. Our files are subsets of the official ones; the
official files are read where ours are absent. The official host publishes no checksums; the ones
Hugging Face's `datasets` recorded for its URLs are pinned here.
"""

from __future__ import annotations

from collections.abc import Iterator

import dspy

from treeqa.data.corpus import text_of
from treeqa.data.loaders import (
    Dataset,
    HubSource,
    Layout,
    SplitFile,
    example,
    paragraph,
    register,
    register_layout,
    unique,
)
from treeqa.data.passage import clean_whitespace
from treeqa.data.sources import Remote, Source, register_source

OFFICIAL = "http://curtis.ml.cmu.edu/datasets/hotpot"


def parse(rec: dict, where: str) -> dspy.Example:
    """`_id, question, answer, supporting_facts [[title, sent]], context [[title, [sentences]]]`;
    the gold paragraphs are the context paragraphs that hold a supporting fact."""
    facts = [(fact[0], fact[1]) for fact in rec.get("supporting_facts") or []]
    titles = unique(title for title, _ in facts)
    sentences = {title: list(sents) for title, sents in rec.get("context") or []}
    context = {title: " ".join(sents) for title, sents in sentences.items()}
    gold = [(title, context.get(title, "")) for title in titles]  # a title missing from the context: no id

    def facts_of(title: str) -> list[str]:
        sents = sentences.get(title, [])
        return [sents[i] for t, i in facts if t == title and isinstance(i, int) and 0 <= i < len(sents)]

    annotation = {"type": rec.get("type"),
                  "gold": [paragraph(t, context[t], facts_of(t)) for t in titles if context.get(t)],
                  "distractors": [paragraph(t, text) for t, text in context.items() if t not in titles],
                  "decomposition": []}
    return example(str(rec["_id"]), rec["question"], [rec["answer"]], gold, annotation)


def paragraphs(record: dict) -> Iterator[tuple[str, str]]:
    """context: [[title, [sentences]]]."""
    for title, sentences in record["context"]:
        text = " ".join(text_of(s, "a context sentence") for s in sentences)
        yield text_of(title, "a context title"), clean_whitespace(text)


def from_hub(row: dict, i: int) -> dspy.Example:
    pairs = zip(row["context"]["title"], row["context"]["sentences"], strict=True)
    context = {title: " ".join(sentences) for title, sentences in pairs}
    gold = [(title, context.get(title, "")) for title in unique(row["supporting_facts"]["title"])]
    return example(row["id"], row["question"], [row["answer"]], gold)


register_layout(Layout("hotpot", parse, paragraphs))
register(Dataset(
    "hotpotqa",
    {"train": SplitFile("hotpotqa/hotpot_train_subset.json", "hotpot", official="hotpotqa/hotpot_train_v1.1.json"),
     "dev": SplitFile("hotpotqa/hotpot_dev_distractor_subset.json", "hotpot",
                      official="hotpotqa/hotpot_dev_distractor_v1.json")},
    eval_split="dev",
    hub=HubSource("hotpotqa/hotpot_qa", "distractor", {"train": "train", "dev": "validation"}, from_hub)))
register_source(Source(
    "hotpotqa",
    # the hashes Hugging Face's `datasets` recorded for these URLs (datasets/hotpot_qa/dataset_infos.json,
    # download_checksums: 46,320,117 and 566,426,227 bytes): a first download is checked, not trusted
    (Remote(f"{OFFICIAL}/hotpot_dev_distractor_v1.json", {"": "hotpotqa/hotpot_dev_distractor_v1.json"},
            sha256="4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea"),
     Remote(f"{OFFICIAL}/hotpot_train_v1.1.json", {"": "hotpotqa/hotpot_train_v1.1.json"},
            sha256="26650cf50234ef5fb2e664ed70bbecdfd87815e6bffc257e068efea5cf7cd316")),
    homepage="https://hotpotqa.github.io", licence="CC BY-SA 4.0", size="dev 44 MB + train 540 MB"))
