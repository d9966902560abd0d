"""Natural Questions, open-domain: NQ-open's 3,610 questions (what the literature calls NQ test)
and DPR's dev questions; searched in the open-domain corpus (Wikipedia leads + the NQ-open
questions' gold DPR passages, from lost-in-the-middle's oracle file).

Also the two question-and-answers layouts other open-domain sets share: `qa_jsonl` and DPR's
`dpr_tsv`. NQ-open and the oracle file are GitHub files of which ours are byte copies, so their
sha256 is pinned here; DPR's file is pinned on first download.
"""

from __future__ import annotations

import ast

import dspy

from treeqa.data.folders import find_file
from treeqa.data.loaders import (
    NQ_GOLD_PASSAGES,
    Dataset,
    HubSource,
    Layout,
    SplitFile,
    example,
    log,
    read_nq_gold_passages,
    register,
    register_layout,
)
from treeqa.data.sources import Remote, Source, register_source


def parse_qa_jsonl(rec: dict, where: str) -> dspy.Example:
    """NQ-open and WebQuestions test: `{question, answer: [..]}`."""
    answers = rec["answer"]
    return example(where, rec["question"], [answers] if isinstance(answers, str) else list(answers))


def parse_dpr_row(row: list[str], where: str) -> dspy.Example:
    """DPR qa.csv: `question<TAB>python-list-of-answers`."""
    if len(row) != 2:
        raise ValueError(f"expected 2 tab-separated columns, found {len(row)}")
    answers = ast.literal_eval(row[1])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError("the answer column is not a list of strings")
    return example(where, row[0], answers)


def with_gold(split: str, examples: list[dspy.Example]) -> list[dspy.Example]:
    """NQ test questions get their gold passage (in the open-domain corpus) as `gold_ids`, so
    recall@k is measured where the corpus can answer; the others keep none. Without the oracle
    file (a data dir of questions only) nothing is added."""
    if split != "test":
        return examples
    path = find_file(NQ_GOLD_PASSAGES)
    if path is None:
        log.warning("%s not found: NQ test questions get no gold passages (no recall@k)", NQ_GOLD_PASSAGES)
        return examples
    gold: dict[str, list[tuple[str, str]]] = {}
    for question, title, text in read_nq_gold_passages(path):
        gold.setdefault(question, []).append((title, text))
    return [example(ex.id, ex.question, ex.answers, gold[ex.question]) if ex.question in gold else ex
            for ex in examples]


def from_hub(row: dict, i: int) -> dspy.Example:
    return example(f"nq-{i}", row["question"], list(row["answer"]))


register_layout(Layout("qa_jsonl", parse_qa_jsonl))
register_layout(Layout("dpr_tsv", parse_dpr_row))
# evaluated on test, the 3,610 NQ-open questions the papers report, whose gold passages are in the
# corpus; NQ's DPR dev questions have none of theirs there
register(Dataset("nq", {"dev": SplitFile("nq/nq-dev.qa.tsv", "dpr_tsv"),
                        "test": SplitFile("nq/NQ-open.test.jsonl", "qa_jsonl")},
                 eval_split="test", corpus="open",
                 hub=HubSource("google-research-datasets/nq_open", None, {"test": "validation"}, from_hub),
                 after_read=with_gold))
register_source(Source(
    "nq",
    (Remote("https://raw.githubusercontent.com/google-research-datasets/natural-questions/master/nq_open/"
            "NQ-open.dev.jsonl", {"": "nq/NQ-open.test.jsonl"},
            sha256="f15567f38099f3615f5b8a685c0aef449c11ad90d3da3735e8d1b98115b40616"),
     Remote("https://raw.githubusercontent.com/nelson-liu/lost-in-the-middle/main/qa_data/nq-open-oracle.jsonl.gz",
            {"": NQ_GOLD_PASSAGES}, sha256="6a7f72b846f663a133ef952244e5a4e43f06bcf190afe34e8fbe687ce0d1653e"),
     Remote("https://dl.fbaipublicfiles.com/dpr/data/retriever/nq-dev.qa.csv", {"": "nq/nq-dev.qa.tsv"})),
    homepage="https://github.com/google-research-datasets/natural-questions/tree/master/nq_open",
    licence="CC BY-SA 3.0", size="0.4 MB test + 0.9 MB gold passages + 0.6 MB dev"))
