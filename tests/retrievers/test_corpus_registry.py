"""The corpus registry under pressure: builds of one name at once all land, and a torn
registry file is an error naming it, which the next build of the name mends."""

import itertools
import json
import re
import threading

import pytest

from treeqa.retrievers import RETRIEVERS, BM25Retriever, build_corpus_index, registered_corpus
from treeqa.retrievers.corpora import CorpusRegistryError


@pytest.fixture
def counted_kind():
    """A retriever kind whose every build keeps one new key in the registry entry."""
    builds = itertools.count()

    class Counted(BM25Retriever):
        kind = "counted"

        @classmethod
        def index_file(cls, path, index_root, name, chunk_words, **options):
            return None, {f"build-{next(builds)}": True}

    RETRIEVERS.register(Counted.kind, Counted)
    yield Counted.kind
    RETRIEVERS.unregister(Counted.kind)


@pytest.fixture
def corpus_file(settings_env, tmp_path):
    settings_env(cache_dir=tmp_path / "cache")
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"id": "a", "title": "A", "text": "a text"}) + "\n")
    return path


# benchmarks/faults.md, fourth round, serve and the corpus registry #3: builds of one name at once

def test_3_concurrent_registrations_of_one_name_all_land(corpus_file, counted_kind):
    errors = []

    def builds():
        try:
            for _ in range(25):
                build_corpus_index(corpus_file, "mine", kind=counted_kind)
        except Exception as exc:  # noqa: BLE001 - the test reports every failure
            errors.append(repr(exc))

    threads = [threading.Thread(target=builds) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    entry = registered_corpus("mine")
    assert sorted(k for k in entry if k.startswith("build-")) == sorted(f"build-{i}" for i in range(200))
    assert entry["file"] == str(corpus_file.resolve())
    leftovers = [p.name for p in (corpus_file.parent / "cache" / "corpora").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


# benchmarks/faults.md, fourth round, serve and the corpus registry #4: a torn registry file

@pytest.mark.parametrize("torn", ['{"name": "mine", "fi', "", '["mine"]', '{"name": "mine"}'])
def test_4_a_torn_registry_names_its_file_and_a_new_build_mends_it(corpus_file, counted_kind, torn):
    build_corpus_index(corpus_file, "mine", kind=counted_kind)
    registry = corpus_file.parent / "cache" / "corpora" / "mine.json"
    registry.write_text(torn)
    expected = re.escape(f"{registry}: the registry entry of corpus 'mine' is torn") + ".*--name mine"
    with pytest.raises(CorpusRegistryError, match=expected):
        registered_corpus("mine")
    build_corpus_index(corpus_file, "mine", kind=counted_kind)
    assert registered_corpus("mine")["file"] == str(corpus_file.resolve())
