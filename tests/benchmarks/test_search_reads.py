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
