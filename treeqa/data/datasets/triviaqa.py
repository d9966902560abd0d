"""TriviaQA (unfiltered, open-domain), as DPR distributes its questions: dev and test in DPR's
qa.csv layout, answers being every alias. Searched in the open-domain corpus. DPR publishes no
checksums: pinned on first download.
"""

from __future__ import annotations

import dspy

from treeqa.data.loaders import Dataset, HubSource, SplitFile, example, register, unique
from treeqa.data.sources import Remote, Source, register_source

DPR = "https://dl.fbaipublicfiles.com/dpr/data/retriever"


def from_hub(row: dict, i: int) -> dspy.Example:
    answer = row["answer"]
    return example(row["question_id"], row["question"], unique([answer["value"], *answer["aliases"]]))


register(Dataset("triviaqa", {"dev": SplitFile("triviaqa/trivia-dev.qa.tsv", "dpr_tsv"),
                              "test": SplitFile("triviaqa/trivia-test.qa.tsv", "dpr_tsv")},
                 eval_split="test", corpus="open",
                 hub=HubSource("mandarjoshi/trivia_qa", "rc.nocontext", {"dev": "validation", "test": "validation"},
                               from_hub)))
register_source(Source(
    "triviaqa",
    (Remote(f"{DPR}/trivia-dev.qa.csv.gz", {"": "triviaqa/trivia-dev.qa.tsv"}, unpack="gunzip"),
     Remote(f"{DPR}/trivia-test.qa.csv.gz", {"": "triviaqa/trivia-test.qa.tsv"}, unpack="gunzip")),
    homepage="https://nlp.cs.washington.edu/triviaqa/", licence="Apache-2.0", size="about 3 MB (gzipped)"))
