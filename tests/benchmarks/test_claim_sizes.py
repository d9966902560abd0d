"""benchmarks/claim_sizes.py plans each open EM target's questions from the committed comparisons."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _claim_sizes():
    spec = importlib.util.spec_from_file_location("claim_sizes", ROOT / "benchmarks" / "claim_sizes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_row_says_what_the_sample_shows_and_what_the_target_would_take():
    claim_sizes = _claim_sizes()
    em = {"diff": 7.11, "ci": [0.0, 14.72], "wins": 34, "losses": 20, "ties": 143, "n": 197}
    cells = [c.strip() for c in claim_sizes.row("HotpotQA dev 197", "a vs rta", em, 8).strip("|").split("|")]
    assert cells[2:] == ["+8 and above 0", "+7.1 [+0.0, +14.7]", "34 / 20 of 197", "7.2", "419", "329"]
    above_zero = [c.strip() for c in claim_sizes.row("2Wiki", "b vs rta", dict(em, wins=20), None).split("|")]
    assert above_zero[3] == "above 0" and above_zero[-2] == "–"  # no size to plan for beyond the measured one


def test_every_target_is_a_committed_comparison(capsys):
    claim_sizes = _claim_sizes()
    claim_sizes.main()
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and " vs " in line]
    assert len(table) == len(claim_sizes.TARGETS) + sum(len(names) for _, _, names in claim_sizes.CEILINGS)
    with pytest.raises(KeyError, match="no comparison"):
        claim_sizes.comparison({"comparisons": {}}, "x vs rta")


def test_the_committed_page_opens_with_what_the_script_prints(capsys):
    _claim_sizes().main()  # its reading follows the tables
    assert (ROOT / "benchmarks" / "claim_sizes.md").read_text(encoding="utf-8").startswith(capsys.readouterr().out)
