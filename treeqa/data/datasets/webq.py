"""WebQuestions: Freebase questions from Google Suggest. The official files are SEMPRE's release
on CodaLab (layout `sempre`: `{url, targetValue, utterance}`, the answers inside a Lisp-like
`(list (description ...))`); ours are re-packagings (`webq_json`, `qa_jsonl`). No checksums are
published: pinned on first download.
"""

from __future__ import annotations

import re

import dspy

from treeqa.data.loaders import Dataset, HubSource, Layout, SplitFile, example, register, register_layout
from treeqa.data.sources import Remote, Source, register_source

CODALAB = "https://worksheets.codalab.org/rest/bundles"
_DESCRIPTION = re.compile(r'\(description (?:"((?:[^"\\]|\\.)*)"|([^)]+?))\)')


def parse_webq_json(rec: dict, where: str) -> dspy.Example:
    return example(str(rec["qId"]), rec["qText"], list(rec["answers"]))


def parse_sempre(rec: dict, where: str) -> dspy.Example:
    """`targetValue`: `(list (description "Jamaican English") (description Kingston))`."""
    target = rec["targetValue"]
    if not isinstance(target, str):
        raise ValueError("targetValue must be text")
    answers = [quoted.replace('\\"', '"') or bare for quoted, bare in _DESCRIPTION.findall(target)]
    return example(where, rec["utterance"], answers)


def from_hub(row: dict, i: int) -> dspy.Example:
    return example(f"webq-{i}", row["question"], list(row["answers"]))


register_layout(Layout("webq_json", parse_webq_json))
register_layout(Layout("sempre", parse_sempre))
register(Dataset(
    "webq",
    {"train": SplitFile("webq/webq-train.json", "webq_json", official="webq/webquestions.examples.train.json",
                        official_layout="sempre"),
     "test": SplitFile("webq/webq-test.jsonl", "qa_jsonl", official="webq/webquestions.examples.test.json",
                       official_layout="sempre")},
    eval_split="test", corpus="open",
    hub=HubSource("stanfordnlp/web_questions", None, {"train": "train", "test": "test"}, from_hub)))
register_source(Source(
    "webq",
    (Remote(f"{CODALAB}/0x4a763f8cde224c2da592b75f29e2f5c2/contents/blob/",
            {"": "webq/webquestions.examples.train.json"}, name="webquestions.examples.train.json"),
     Remote(f"{CODALAB}/0xe7bac352fce7448c9ef238fb0a297ec2/contents/blob/",
            {"": "webq/webquestions.examples.test.json"}, name="webquestions.examples.test.json")),
    homepage="https://worksheets.codalab.org/worksheets/0xba659fe363cb46e7a505c5b6a774dc8a",
    licence="CC BY 4.0", size="about 1.2 MB"))
