"""Retrieval on real data and real embeddings: dense search over the pooled HotpotQA corpus, a Ray-built index."""

import json

import numpy as np
import pytest

from tests.fakes import SHARED_DATA, requires_shared_data
from treeqa.data import load_split
from treeqa.retrievers import DenseRetriever, get_retriever


@requires_shared_data
@pytest.mark.integration
def test_dense_finds_gold_paragraph_on_real_pooled_hotpotqa(settings_env):
    """The first dev question (Scott Derrickson / Ed Wood) among ~4k real paragraphs."""
    settings_env(data_dir=SHARED_DATA)
    retriever = get_retriever("hotpotqa", "dense")
    assert len(retriever.passages) > 3000
    example = load_split("hotpotqa", "dev")[0]
    assert example.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    top5 = {p.title for p in retriever.search(example.question, 5)}
    assert top5 & set(example.gold_titles), top5


def _write(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


@pytest.mark.integration
def test_ray_builds_the_same_index_as_one_machine(tmp_path):
    """A local Ray instance embeds a small corpus with the real encoder: the same vectors and
    the same search results as the build on this machine."""
    pytest.importorskip("ray")
    import ray

    docs = [{"id": f"d{i}", "title": f"Topic {i}", "text": f"Paragraph {i} is about subject {i % 9} and place {i % 4}."}
            for i in range(40)]
    path = _write(tmp_path / "c.jsonl", docs)
    try:
        on_ray = DenseRetriever.for_file(path, tmp_path / "ray", "r", batch_size=8, ray_address="local")
    finally:
        ray.shutdown()
    here = DenseRetriever.for_file(path, tmp_path / "here", "r", batch_size=8)
    assert np.allclose(on_ray.index.reconstruct_n(0, 40), here.index.reconstruct_n(0, 40), atol=1e-5)
    query = "subject 3 and place 1"
    assert [p.id for p in on_ray.search(query, 5)] == [p.id for p in here.search(query, 5)]
