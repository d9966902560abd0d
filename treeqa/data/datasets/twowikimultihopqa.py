"""2WikiMultihopQA: multi-hop questions over Wikipedia and Wikidata, in HotpotQA's layout.

The official files are one zip on Dropbox (with train, dev and test); `treeqa data get` takes
train.json and dev.json from it. No checksum is published: pinned on first download.
"""

from __future__ import annotations

from treeqa.data.loaders import Dataset, SplitFile, register
from treeqa.data.sources import Remote, Source, register_source

register(Dataset(
    "2wikimultihopqa",
    {"train": SplitFile("2wikimultihopqa/train_subset.json", "hotpot", official="2wikimultihopqa/train.json"),
     "dev": SplitFile("2wikimultihopqa/dev_subset.json", "hotpot", official="2wikimultihopqa/dev.json")},
    eval_split="dev"))
register_source(Source(
    "2wikimultihopqa",
    (Remote("https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1",
            {"train.json": "2wikimultihopqa/train.json", "dev.json": "2wikimultihopqa/dev.json"},
            name="data_ids_april7.zip", unpack="zip"),),
    homepage="https://github.com/Alab-NII/2wikimultihop", licence="Apache-2.0",
    size="one zip (train, dev, test), several hundred MB unpacked"))
