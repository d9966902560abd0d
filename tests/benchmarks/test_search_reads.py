"""The search-reads benchmark's variant syntax: values are JSON, so a list survives."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "search_reads.py"


@pytest.fixture(scope="module")
def search_reads():
    spec = importlib.util.spec_from_file_location("search_reads", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_variant_reads_its_settings_as_json(search_reads):
    name, changes = search_reads.parse_variant("root8-evidence2=widths=[8,3,3];max_evidence=2")
    assert name == "root8-evidence2"
    assert changes == {"widths": [8, 3, 3], "max_evidence": 2}


def test_a_bad_value_is_an_error_not_a_string(search_reads):
    with pytest.raises(ValueError):
        search_reads.parse_variant("x=widths=[8,3")


class _Piece:
    def __init__(self, *ids):
        self.passages = [type("P", (), {"id": i})() for i in ids]


class _Program:
    """A search whose reading pool is fixed: accepted evidence first, then the rest."""

    passages_read = 5

    def __init__(self, pool):
        self.pool = pool

    def search_tree(self, question):
        return type("Run", (), {"retrieved": [p for piece in self.pool for p in piece.passages]})()

    def reading(self, run):
        return self.pool, None


def test_the_reads_are_the_first_five_distinct_paragraphs_of_the_pool(search_reads):
    from treeqa.signatures.fusion import PASSAGES_READ

    program = _Program([_Piece("a", "b"), _Piece("b", "c"), _Piece("d"), _Piece("e", "f", "g")])
    ids, retrieved, seconds = search_reads.read_ids(program, "q")
    assert PASSAGES_READ == 5 and ids == ["a", "b", "c", "d", "e"] and seconds >= 0
    assert retrieved == set("abcdefg")  # what the search found, read or not


def test_a_variant_is_paired_against_the_compiled_setting_on_the_same_questions(search_reads):
    compiled = [0.5, 0.5, 1.0, 0.0]
    assert search_reads.paired(compiled, compiled) == ""  # the compiled row itself
    text = search_reads.paired([1.0, 0.5, 1.0, 0.5], compiled)
    assert text.startswith("+25.0 [") and text.endswith("2 more, 0 less")
    with pytest.raises(ValueError, match="same questions"):
        search_reads.paired([1.0], compiled)
