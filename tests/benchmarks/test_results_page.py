"""docs/results.md is what the recorded runs (benchmarks/*.yaml) give: it cannot drift from them."""

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RELEASED = json.loads((ROOT / "treeqa/train/released/reader.json").read_text())["adapter"]["sha256"]


def test_the_results_page_is_generated_from_the_recorded_runs():
    done = subprocess.run([sys.executable, "benchmarks/results_page.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    page = (ROOT / "docs" / "results.md").read_text()
    for yaml_file in (ROOT / "benchmarks").glob("*.yaml"):
        if yaml_file.name != "headline.yaml":  # the README's pick of rows, not a sample
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


def _table(text: str, start: str, end: str) -> list[list[str]]:
    at = text.index(start)
    block = text[at:text.index(end, at + len(start))]
    lines = block.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = [line.strip("|").split("|") for line in lines[first:] if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows]


def _readme_table() -> list[list[str]]:
    return _table((ROOT / "README.md").read_text(), "<!-- the table below is generated",
                  "<!-- end of the generated table -->")


def _across_table() -> list[list[str]]:
    return _table((ROOT / "docs" / "results.md").read_text(), "## Every program on the claim samples", "\n## ")


CELL = re.compile(r"^(?P<em>[\d.]+) (?:\[(?P<lo>\S+), (?P<hi>\S+)\]|\((?P<d>\S+) \[(?P<dlo>\S+), (?P<dhi>\S+)\]\))$")


def _close(shown: str, value: float) -> bool:
    shown = shown.replace("−", "-")
    return abs(float(shown) - value) <= (0.5 if "." not in shown else 0.05) + 1e-9


def _shown_runs(table: list[list[str]]) -> set[tuple[str, str]]:
    """(sample, run) of every cell: each is a run of its column's YAML, its EM and rta's interval or
    the run's paired difference from rta with its interval."""
    header, _, *rows = table
    samples = {"HotpotQA dev, 197": "hotpotqa-dev-unexamined-skip100-n197",
               "2Wiki dev, 100": "2wikimultihopqa-dev-unexamined-skip50-n100",
               "MuSiQue dev, 100": "musique-dev-unexamined-skip0-n100"}
    assert header[1:] == list(samples)
    shown = set()
    for row in rows:
        for title, cell in zip(header[1:], row[1:], strict=True):
            if cell == "–":
                continue
            doc = yaml.safe_load((ROOT / "benchmarks" / f"{samples[title]}.yaml").read_text())
            m = CELL.match(cell)
            assert m, f"{title}: {cell!r} is not 'EM [lo, hi]' or 'EM (diff [lo, hi])'"
            matches = []
            for entry in doc["runs"]:
                fig = entry.get("figures") or entry.get("compiled")
                if not _close(m["em"], fig["em"]):
                    continue
                if m["lo"] is not None:
                    ok = entry["run"] == "rta" and _close(m["lo"], fig["em_ci"][0]) and _close(m["hi"], fig["em_ci"][1])
                else:
                    pair = (doc.get("comparisons") or {}).get(f"{entry['run']} vs rta", {}).get("em")
                    ok = bool(pair) and all(_close(a, b) for a, b in zip((m["d"], m["dlo"], m["dhi"]),
                                                                         (pair["diff"], *pair["ci"]), strict=True))
                if ok:
                    matches.append(entry["run"])
            assert matches, f"{title}: {cell} is no run of {samples[title]}.yaml"
            shown |= {(samples[title], run) for run in matches}
    return shown


def test_the_readme_table_is_the_few_rows_headline_yaml_picks_and_what_the_yamls_give():
    """At most six rows, in headline.yaml's order and words, each cell its named run's figures."""
    table = _readme_table()
    spec = yaml.safe_load((ROOT / "benchmarks" / "headline.yaml").read_text())
    assert [row[0] for row in table[2:]] == [row["label"] for row in spec["rows"]] and len(table) - 2 <= 6
    shown = _shown_runs(table)
    for row in spec["rows"]:
        for sample, run in zip(spec["samples"], row["runs"], strict=True):
            assert run is None or (sample["yaml"], run) in shown, (sample["yaml"], run)


def test_the_results_pages_table_of_every_program_is_what_the_yamls_give():
    """docs/results.md's table across the claim samples: the balanced adapter and the figures below
    rta (2Wiki's and MuSiQue's path judge) are among its cells."""
    shown = _shown_runs(_across_table())
    assert {("hotpotqa-dev-unexamined-skip100-n197", "rta-lora-balanced"),
            ("2wikimultihopqa-dev-unexamined-skip50-n100", "rta-lora-balanced"),
            ("2wikimultihopqa-dev-unexamined-skip50-n100", "tor-path-judge"),
            ("musique-dev-unexamined-skip0-n100", "tor-path-judge"),
            ("musique-dev-unexamined-skip0-n100", "tor-path-judge-read-3-reader")} <= shown


def test_the_results_page_holds_figures_not_how_runs_were_made():
    """Commit hashes, dates and machines are in each YAML's note and each run's NOTES.md."""
    page = (ROOT / "docs" / "results.md").read_text()
    assert not re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", page)
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b|\d\d:\d\d UTC", page)
    assert not re.findall(r"EPYC|Xeon|frozen checkout|make test|helpers", page)


def test_the_reproduction_page_has_a_command_for_every_figure_of_the_results_page():
    """docs/reproduce.md (generated): a row for every run of every sample's YAML, its command writing
    into runs/reproduce/ (never a committed folder) and the EM its run recorded; † exactly where the
    compiled file's adapter is not in the clone."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reproduce_page import _run_name

    page = (ROOT / "docs" / "reproduce.md").read_text()
    sections = {title: body for title, _, body in (part.partition("\n") for part in page.split("\n## ")[1:])}
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split())
    rows = 0
    for path in sorted((ROOT / "benchmarks").glob("*.yaml")):
        if path.name == "headline.yaml":
            continue
        entries = yaml.safe_load(path.read_text())["runs"]
        found = list(re.finditer(r"^\| ([\w.-]+)( †)? \| `([^`]*)` \| (.*?) \|", sections[path.stem], re.M))
        assert len(found) == len(entries), path.stem
        for entry, row in zip(entries, found, strict=True):
            run = _run_name(entry)
            assert row.group(1) == run, f"{path.stem}: no row for {run}"
            command = row.group(3)
            assert f"runs/reproduce/{path.stem}/{run}" in command and "--out benchmarks/" not in command
            fig = entry.get("figures") or entry.get("compiled")
            assert _close(row.group(4).removeprefix("compiled ").split()[0].rstrip(";"), fig["em"]), (path.stem, run)
            compiled = re.search(r"--compiled (\S+)", command)
            if compiled and (ROOT / compiled.group(1)).is_file():
                adapter = (json.loads((ROOT / compiled.group(1)).read_text()).get("treeqa") or {}).get("adapter")
                in_clone = adapter is None or (str(Path(compiled.group(1)).parent / adapter["file"]) in tracked
                                               or adapter["sha256"] == RELEASED)
                assert bool(row.group(2)) == (not in_clone), (path.stem, run)
            rows += 1
    assert rows > 140
