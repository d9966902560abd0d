"""docs/results.md is what the recorded runs (benchmarks/*.yaml) give: it cannot drift from them."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_results_page_is_generated_from_the_recorded_runs():
    done = subprocess.run([sys.executable, "benchmarks/results_page.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    page = (ROOT / "docs" / "results.md").read_text()
    for yaml_file in (ROOT / "benchmarks").glob("*.yaml"):
        assert f"## {yaml_file.stem}" in page
    assert page.index("unexamined") < page.index("dev100")  # the claim samples first
