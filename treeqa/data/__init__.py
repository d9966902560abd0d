"""Benchmark questions and retrieval corpora from the official files."""

from treeqa.data.corpus import Passage, corpus_description, load_corpus
from treeqa.data.datasets import discover
from treeqa.data.loaders import DATASETS, EVAL_SPLITS, SPLITS, DataError, load_examples, load_split, sample

discover()  # each file of treeqa/data/datasets (and of TREEQA_DATASETS) registers its dataset

DEFAULT_DATASET = "hotpotqa"  # what a command runs on, or searches the corpus of, when no dataset is named

__all__ = ["DATASETS", "DEFAULT_DATASET", "EVAL_SPLITS", "SPLITS", "DataError", "Passage", "corpus_description",
           "discover",
           "load_corpus", "load_examples", "load_split", "sample"]
