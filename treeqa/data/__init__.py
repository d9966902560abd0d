"""Benchmark questions and retrieval corpora from the official files."""

from treeqa.data.corpus import Passage, load_corpus
from treeqa.data.loaders import DATASETS, SPLITS, DataError, load_examples, load_split, sample

__all__ = ["DATASETS", "SPLITS", "DataError", "Passage", "load_corpus", "load_examples", "load_split", "sample"]
