"""docs/results.md is what the recorded runs (benchmarks/*.yaml) give: it cannot drift from them."""

import re
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


NUMBER = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.])")  # a figure: a number with a decimal point


def _figures(text: str) -> set[float]:
    return {abs(float(n)) for n in NUMBER.findall(text)}


def test_the_benchmarks_readme_quotes_only_the_files_it_links():
    """benchmarks/README.md is written by hand from the recorded runs: every figure in a paragraph
    is in a file that paragraph links, every figure in a table in a file the paragraph above the
    table links (a figure rounded differently, or made up, is not), and every link resolves."""
    readme = ROOT / "benchmarks" / "README.md"
    text = readme.read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        assert (readme.parent / target).exists(), f"benchmarks/README.md links {target}, which is not there"
    above: list[str] = []
    checked = 0
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        is_table = bool(lines) and lines[0].startswith("|")
        linked = re.findall(r"\]\(([^)#]+\.(?:yaml|md))\)", block)
        sources = above if is_table else linked
        rows = lines[2:] if is_table else lines
        quoted = _figures(re.sub(r"`[^`]*`|\]\([^)]*\)", "", "\n".join(rows)))  # not in code or link targets
        if quoted:
            assert sources, f"figures with no linked file to come from: {block[:120]}"
            known = set().union(*(_figures((readme.parent / s).read_text()) for s in sources))
            assert quoted <= known, f"not in {sources}: {sorted(quoted - known)}"
            checked += len(quoted)
        if not is_table:
            above = linked
    assert checked > 100
