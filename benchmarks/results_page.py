"""docs/results.md and the README's headline table from the recorded runs (benchmarks/*.yaml), so
neither can drift from the records: `record.py` rebuilds both with every YAML it writes.

    python benchmarks/results_page.py           # write docs/results.md and the README's table
    python benchmarks/results_page.py --check   # exit 1 if either is not what the YAMLs give

The page holds figures only; how each run was made (machine, checkout, pauses) is in its YAML's
note and the NOTES.md of its folder under benchmarks/runs/.
"""

from __future__ import annotations

import argparse
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # treeqa, when run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # reproduce_page beside it, however this is loaded

from reproduce_page import PAGE as REPRODUCE_PAGE  # noqa: E402 (docs/reproduce.md, beside this file)
from reproduce_page import page as reproduce_page  # noqa: E402

from treeqa.evaluation.stats import run_intervals  # noqa: E402
from treeqa.evaluation.tables import comparison_table  # noqa: E402

HERE = Path(__file__).parent
PAGE = HERE.parent / "docs" / "results.md"
README = HERE.parent / "README.md"
# the samples a claim may be made on come first: questions nobody examined while designing
ORDER = ("unexamined", "dev100", "dev50", "train", "")


def _recall(fig: dict) -> str:
    """recall@15, and over how many questions where not all have gold paragraphs (NQ)."""
    among = fig.get("recall@15_questions")
    return f"{fig.get('recall@15', '–')}" + (f" (of {among})" if among else "")


def _cell(fig: dict, key: str) -> str:
    ci = fig.get(f"{key}_ci")
    if ci is None and key == "em" and fig.get("n"):
        # EM is 0/1 per question, so its bootstrap interval follows from n and the count
        # alone: older files that kept only the means get the same interval their records would
        n = int(fig["n"])
        k = round(float(fig["em"]) * n / 100)
        ci = run_intervals([{"em": 1.0}] * k + [{"em": 0.0}] * (n - k), keys=("em",))["em_ci"]
    return f"{fig.get(key)} [{ci[0]}, {ci[1]}]" if ci else str(fig.get(key))


def _label(entry: dict) -> str:
    spec = entry["spec"]
    label = spec["program"] + (f" ({spec['preset']})" if spec.get("preset") else "")
    if entry.get("run") not in (None, spec["program"]):  # older files name no run
        label += f" `{entry['run']}`"
    params = {k: v for k, v in (spec.get("params") or {}).items() if not k.startswith("_")}
    if "path_judge" in params:  # `evaluate --compiled`: the judge's weights are in the YAML, not the table
        shown = {k: v for k, v in params.items() if k in ("read_top", "fusion", "expansion", "widths")
                 or (k == "evidence_chars" and v is not None)}
        return f"{label} compiled (path-judge) {shown}"
    return label + (f" {params}" if params else "")


def _variants(entry: dict) -> list[tuple[str, dict]]:
    """(setting, figures) rows of one YAML entry: an evaluate run's one, an optimize run's two, and
    the compiled row alone while an optimize run's zero-shot side is unfinished."""
    if entry["kind"] == "evaluate":
        source = (entry["spec"].get("params") or {}).get("_repicked_from")
        if source:  # `treeqa repick`: the source run's trees, another pick
            source = Path(source)
            return [(f"re-picked from {source.parent.name if source.name == 'compiled' else source.name}",
                     entry["figures"])]
        return [("", entry["figures"])]
    compiled = f"compiled ({entry['spec'].get('optimizer', '?')})"
    if "figures" in entry:
        return [(compiled, entry["figures"])]
    if entry["zero_shot"] is None:  # optimize --no-zero-shot
        return [(compiled, entry["compiled"])]
    return [("zero-shot", entry["zero_shot"]), (compiled, entry["compiled"])]


def _rank(path: Path) -> tuple[int, str]:
    return next(i for i, key in enumerate(ORDER) if key in path.stem), path.stem


def sample_section(path: Path) -> str:
    doc = yaml.safe_load(path.read_text())
    runs = doc.get("runs") or []
    first = runs[0] if runs else {}
    data = first.get("data") or {}
    lines = [f"## {path.stem}", ""]
    if data.get("questions"):
        corpus = f"; corpus: {data['corpus']}" if data.get("corpus") else ""  # older runs did not record it
        lines += [f"Questions: {data['questions']}{corpus}.", ""]
    lines += ["| program | setting | n | EM [95% CI] | F1 [95% CI] | recall@15 | LM calls/q | s/q |",
              "|---|---|---|---|---|---|---|---|"]
    for entry in runs:
        for setting, fig in _variants(entry):
            lines.append(f"| {_label(entry)} | {setting} | {fig.get('n')} | {_cell(fig, 'em')} | "
                         f"{_cell(fig, 'f1')} | {_recall(fig)} | {fig.get('lm_calls_per_q')} | "
                         f"{fig.get('seconds_per_q')} |")
    if doc.get("comparisons"):
        lines += ["", "Paired (A − B on the same questions):", "", comparison_table(doc["comparisons"]).rstrip()]
    lines += ["", f"Commands, settings, versions, how each run was made and every figure: `benchmarks/{path.name}`; "
              f"per-question records and notes: `benchmarks/runs/{path.stem}/`.", ""]
    return "\n".join(lines)


# docs/results.md's table of every program on the claim samples (columns): a row each, the run of each
# sample that stands for a program; every figure comes from the sample's YAML, each other row paired with
# rta. The README's table is the few rows benchmarks/headline.yaml picks, from the same YAMLs.
HEADLINE_YAML = HERE / "headline.yaml"
HEADLINE_MAX_ROWS = 6
ACROSS_SAMPLES = (("HotpotQA dev, 197", "hotpotqa-dev-unexamined-skip100-n197"),
                    ("2Wiki dev, 100", "2wikimultihopqa-dev-unexamined-skip50-n100"),
                    ("MuSiQue dev, 100", "musique-dev-unexamined-skip0-n100"))
ACROSS_BASE = "rta"
ACROSS_ROWS = (
    ("rta (retrieve 5, answer)", ("rta", "rta", "rta")),
    ("Tree of Reviews, zero-shot", ("tor", "tor", "tor")),
    ("ToR compiled: path judge, the paper's reader¹", ("tor-path-judge-replay", "tor-path-judge", "tor-path-judge")),
    ("ToR compiled: path judge, reading the top 3, reader compiled",
     ("tor-path-judge-read-3-reader",) * 3),
    ("rta with a LoRA reader trained on CPU (the balanced adapter)", ("rta-lora-balanced", "rta-lora-balanced", None)),
    ("ToR compiled with that adapter on its reader, re-reading the searches above²",
     ("tor-path-judge-replay-lora-balanced", "tor-path-judge-read-3-reader-replay-lora-balanced", None)),
    ("ToR compiled with an adapter trained on 185 of ToR's own reads, re-reading the same searches²",
     ("tor-path-judge-replay-lora-tor-v1", "tor-path-judge-read-3-reader-replay-lora-tor-v1", None)),
    ("ToR compiled, its searches read in rta's prompt by the base reader⁴",
     ("tor-path-judge-replay-passages", "tor-path-judge-read-3-reader-replay-passages",
      "tor-path-judge-read-3-reader-replay-passages")),
    ("ToR compiled, its searches read in rta's prompt through the v3 adapter of the full epoch⁴",
     ("tor-path-judge-replay-passages-lora-v3-full", "tor-path-judge-read-3-reader-replay-passages-lora-v3-full",
      None)),
    ("ToR compiled, its searches read in rta's prompt through the v4 adapter⁴",
     ("tor-path-judge-replay-passages-lora-v4", "tor-path-judge-read-3-reader-replay-passages-lora-v4",
      "tor-path-judge-read-3-reader-replay-passages-lora-v4")),
    ("ToR compiled, its searches read in rta's prompt through the v6 adapter⁴",
     ("tor-path-judge-replay-passages-lora-v6", None, None)),
    ("ToR as the main command compiles it (path judge, linked search, the released reader), searching itself (live)",
     ("tor-priced-compile", "tor-priced-compile", "tor-priced-compile")),
    ("the same with the paper's MPC search (the main command's compile before), searching itself (live)",
     ("tor-default-compile", "tor-default-compile", "tor-default-compile")),
    ("ToR compiled, searching itself (live), read in rta's prompt through the v4 adapter",
     ("tor-path-judge-passages-lora-v4", "tor-path-judge-read-3-reader-passages-lora-v4",
      "tor-path-judge-read-3-reader-passages-lora-v4")),
    ("the beam (ALLIES) compiled: path judge, searching itself (live)", ("beam-path-judge", None, None)),
    ("the beam compiled, its searches read in rta's prompt by the base reader⁵",
     ("beam-path-judge-replay-passages", None, None)),
    ("the beam compiled, its searches read in rta's prompt through the v4 adapter⁵",
     ("beam-path-judge-replay-passages-lora-v4", None, None)),
    ("the beam compiled, searching itself (live), read in rta's prompt through the v4 adapter",
     ("beam-path-judge-passages-lora-v4", None, None)),
    ("the beam as the main command compiles it (path judge, the released reader), its searches read again⁵",
     ("beam-path-judge-replay-main-compile", None, None)),
    ("rta with the reader set v1's adapter (600 of its 1,010 gold reads, trained on CPU)",
     ("rta-lora-v1", "rta-lora-v1", None)),
    ("rta with the reader set v2's adapter (368 of its 528 reads drawn from rta's own retrieval, gold and "
     "partial reads)", ("rta-lora-v2", "rta-lora-v2", None)),
    ("rta with the reader set v3's adapter (656 of its 973 reads: v2's mix, the evidence questions, yes/no "
     "balanced by dataset)", ("rta-lora-v3", "rta-lora-v3", None)),
    ("the same training run to the end of its epoch (all 973 reads)", ("rta-lora-v3-full", None, None)),
    ("rta with the v4 adapter (v3's reads and every built read of a yes/no question: 1,073)",
     ("rta-lora-v4", "rta-lora-v4", None)),
    ("rta with the v5 adapter (v4's reads, an evidence question's distractors untitled sentences like its gold)",
     ("rta-lora-v5", "rta-lora-v5", None)),
    ("rta with the v6 adapter (v5's reads at the learning rate 5e-4 the recipe comparison chose)",
     ("rta-lora-v6", "rta-lora-v6", None)),
    ("rta reasoning before it answers, the base model (a reasoning cut off at 448 tokens answered by the bare reader)",
     ("rta-reason", None, None)),
    ("rta reasoning before it answers, through an adapter trained on 218 of the model's own reasons (STaR)",
     ("rta-lora-reasons", None, None)),
    ("the same, a reasoning cut off at its 448 tokens answered by the bare reader (as rta answers now)",
     ("rta-lora-reasons-bare", None, None)),
    ("its control: rta with an adapter trained on the same 218 reads, bare answers without the reasons",
     ("rta-lora-reasoned-only", None, None)),
    ("rta reading only each question's gold paragraphs (the reader alone)³", ("rta-gold", "rta-gold", None)),
    ("the same with the reader set v1's adapter³", ("rta-lora-v1-gold", None, None)),
    ("the same with the v3 adapter of the full epoch³", ("rta-lora-v3-full-gold", None, None)),
    ("the same with the v4 adapter³", ("rta-lora-v4-gold", "rta-lora-v4-gold", None)),
    ("the same with the v6 adapter³", ("rta-lora-v6-gold", None, None)),
)
ACROSS_NOTES = (
    "¹ HotpotQA's reads the searches recorded by the path-judge run that reads the top 3 (`treeqa replay`); "
    "2Wiki's and MuSiQue's searched themselves.",
    "² a row above with the adapter on its reader, reading the searches that row recorded, so the two differ "
    "in the reader's weights alone: HotpotQA's is row ¹, 2Wiki's and MuSiQue's the row reading the top 3.",
    "³ `--retriever gold`: the reader is given the question's gold paragraphs and nothing else, so the "
    "difference from rta is what retrieval costs the reader.",
    "⁴ `fusion=passages`: ToR's reader is rta's, shown the search's first five distinct paragraphs (the "
    "accepted evidence first), re-reading the searches of the rows that ² names.",
    "⁵ `reading=passages`: the beam's answering state is read by rta's reader over the distinct paragraphs "
    "behind it, root first, re-reading the searches of the live beam row (`treeqa replay`).",
)
TABLE_START = "<!-- the table below is generated by benchmarks/results_page.py from benchmarks/*.yaml: edit those -->"
TABLE_END = "<!-- end of the generated table -->"


def _number(x: float, whole: bool, sign: bool = False) -> str:
    """x to a whole number or one decimal, halves rounded up as written (29.95 is 30.0, not 29.9)."""
    text = str(Decimal(str(x)).quantize(Decimal("1" if whole else "0.1"), rounding=ROUND_HALF_UP))
    if float(text) == 0:
        text = text.lstrip("-")
    elif sign and x > 0:
        text = "+" + text
    return text.replace("-", "−")


def _interval(ci: list[float], sign: bool, value: float | None = None) -> str:
    """'[lo, hi]', or 'value [lo, hi]'; whole numbers where all are whole (samples of 100)."""
    shown = [v for v in (value, *ci) if v is not None]
    whole = all(float(v).is_integer() for v in shown)
    text = f"[{_number(ci[0], whole, sign)}, {_number(ci[1], whole, sign)}]"
    return text if value is None else f"{_number(value, whole, sign)} {text}"


def _headline_figures(run: str, doc: dict) -> dict:
    """The EM figures of `run` in one sample's YAML (an optimize run's compiled side)."""
    entry = next(e for e in doc["runs"] if e["run"] == run)
    return entry.get("figures") or entry["compiled"]


def headline_cell(run: str | None, doc: dict, base: str = ACROSS_BASE) -> str:
    """'EM [CI]' for the base; for any other run 'EM (paired difference from the base [CI])'."""
    if run is None:
        return "–"
    fig = _headline_figures(run, doc)
    if run == base:
        return f"{_number(fig['em'], False)} {_interval(fig['em_ci'], False)}"
    pair = doc["comparisons"][f"{run} vs {base}"]["em"]
    return f"{_number(fig['em'], False)} ({_interval(pair['ci'], True, pair['diff'])})"


def _table(samples, rows, base: str, first: str = "program") -> list[str]:
    """A markdown table: a column a sample (title, YAML stem), a row a (label, runs) pair."""
    docs = [yaml.safe_load((HERE / f"{stem}.yaml").read_text()) for _, stem in samples]
    lines = [f"| {first} | " + " | ".join(title for title, _ in samples) + " |", "|---" * (len(samples) + 1) + "|"]
    for label, runs in rows:
        cells = [headline_cell(run, doc, base) for run, doc in zip(runs, docs, strict=True)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def headline_spec() -> dict:
    """benchmarks/headline.yaml, checked: at most six rows, one run (or null) a sample each."""
    spec = yaml.safe_load(HEADLINE_YAML.read_text())
    samples = [(s["title"], s["yaml"]) for s in spec["samples"]]
    rows = [(r["label"], tuple(r["runs"])) for r in spec["rows"]]
    if len(rows) > HEADLINE_MAX_ROWS:
        raise ValueError(f"{HEADLINE_YAML.name}: {len(rows)} rows; the README's table holds at most "
                         f"{HEADLINE_MAX_ROWS}")
    for label, runs in rows:
        if len(runs) != len(samples):
            raise ValueError(f"{HEADLINE_YAML.name}: row {label!r} names {len(runs)} runs for {len(samples)} samples")
    return {"samples": samples, "rows": rows, "base": spec["base"], "notes": spec.get("notes") or []}


def headline() -> str:
    spec = headline_spec()
    lines = _table(spec["samples"], spec["rows"], spec["base"], first="program ([glossary](docs/glossary.md))")
    return "\n".join([TABLE_START, "", *lines, "", *(f"{note}\n" for note in spec["notes"]), TABLE_END])


def across() -> str:
    """results.md's first section: every program recorded on the claim samples, paired with rta."""
    lines = _table(ACROSS_SAMPLES, ACROSS_ROWS, ACROSS_BASE)
    return "\n".join(["## Every program on the claim samples", "",
                      "EM with its 95% bootstrap interval, and in brackets the paired difference from rta with "
                      "its interval (embedded model, `--no-cache`); the sections below hold each sample's other "
                      "figures and comparisons.", "", *lines, "", *(f"{note}\n" for note in ACROSS_NOTES)])


def readme(text: str) -> str:
    """README.md's text with its generated table replaced by what the YAMLs give."""
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    return text[:start] + headline() + text[end:]


def _samples() -> list[Path]:
    """Every sample's YAML (not headline.yaml, which picks the README's rows), the claim samples first."""
    return sorted((p for p in HERE.glob("*.yaml") if p != HEADLINE_YAML), key=_rank)


def page() -> str:
    files = _samples()
    head = ("# Results\n\nGenerated by `python benchmarks/results_page.py` from the recorded runs "
            "(`benchmarks/*.yaml`; per-question records under `benchmarks/runs/`), one section a sample. "
            "Embedded model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) on a 2-core CPU unless a sample's notes say "
            "otherwise. EM and F1 carry 95% bootstrap intervals over the questions; two programs differ only "
            "where their paired interval excludes 0. Samples named `unexamined` are questions nobody looked "
            "at while designing: the only ones a claim is made on; the others are development samples. A run's "
            "name says what it is: `-path-judge` a ToR compiled with the path judge, `-read-3` reading the top 3 "
            "evidence paths, `-reader` the reader compiled on recorded reads, `-replay` a program re-reading "
            "another run's recorded searches (`treeqa replay`: its seconds are the reading's alone), `-lora` "
            "and `-lora-balanced` a reader answering through a LoRA adapter (`benchmarks/runs/lora-reader-rta*/`). "
            "Seconds a question were measured on different machines and loads, so compare them only where a "
            "sample's YAML says two runs shared one. How to run the headline figures again is "
            "[reproduce.md](reproduce.md); the write-ups of the reference runs as they were measured are in "
            "[history.md](history.md). What each program costs beside its EM, every sample at a glance "
            "(`python benchmarks/frontier.py` draws it from the same YAMLs):\n\n"
            "![EM against seconds a question, every program on each sample](frontier.png)\n\n")
    return head + across() + "\n" + "\n".join(sample_section(path) for path in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    pages = {PAGE: page(), README: readme(README.read_text()), REPRODUCE_PAGE: reproduce_page(_samples())}
    if args.check:
        stale = [path.name for path, text in pages.items() if not path.is_file() or path.read_text() != text]
        if stale:
            sys.exit(f"{', '.join(stale)}: not what benchmarks/*.yaml give: run python benchmarks/results_page.py")
        return
    write_pages()


def write_pages() -> None:
    """docs/results.md and the README's table, from the YAMLs as they are now."""
    PAGE.write_text(page())
    README.write_text(readme(README.read_text()))
    REPRODUCE_PAGE.write_text(reproduce_page(_samples()))
    print(f"wrote {PAGE}, {REPRODUCE_PAGE} and the table in {README}")


if __name__ == "__main__":
    main()
