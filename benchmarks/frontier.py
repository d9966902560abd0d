"""EM against seconds a question, for every program recorded on each sample: what each point costs,
drawn from the committed YAMLs (benchmarks/*.yaml) into docs/frontier.png.

    python benchmarks/frontier.py [--out docs/frontier.png]

A point is a run that searched and read itself: replays (their seconds are the reading's alone) and
runs given the gold paragraphs (no retrieval) are left out. Compiled programs (a compile, a path
judge or an adapter) are filled, zero-shot ones hollow; the README's rows are named. Seconds are
those of each run's own machine and load (its YAML's note), so two points compare only where the
note says they shared one.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # reproduce_page beside it, however this is loaded
from reproduce_page import _run_name  # noqa: E402 (a run's name, older YAMLs' too)

HERE = Path(__file__).parent
PAGE_PLOT = HERE.parent / "docs" / "frontier.png"
SAMPLES = (("HotpotQA dev, 197", "hotpotqa-dev-unexamined-skip100-n197"),
           ("2Wiki dev, 100", "2wikimultihopqa-dev-unexamined-skip50-n100"),
           ("MuSiQue dev, 100", "musique-dev-unexamined-skip0-n100"),
           ("NQ test, 100", "nq-test100"), ("TriviaQA test, 100", "triviaqa-test100"),
           ("WebQ test, 100", "webq-test100"))


@dataclass(frozen=True)
class Point:
    run: str
    em: float
    seconds: float
    compiled: bool


def _is_compiled(entry: dict) -> bool:
    params = (entry.get("spec") or {}).get("params") or {}
    return entry.get("kind", "").startswith("optimize") or "path_judge" in params or "lora" in entry.get("run", "")


def points(doc: dict) -> list[Point]:
    """The runs of one sample's YAML that searched and read themselves, with EM and seconds a question."""
    found = []
    for entry in doc.get("runs") or []:
        run = _run_name(entry)
        fig = entry.get("figures") or entry.get("compiled") or {}
        spec = entry.get("spec") or {}
        if "replay" in run or spec.get("retriever") == "gold" or not fig.get("seconds_per_q"):
            continue
        found.append(Point(run, float(fig["em"]), float(fig["seconds_per_q"]), _is_compiled(entry)))
    return found


def headline_runs() -> dict[str, set[str]]:
    """Sample -> the runs the README's table shows (benchmarks/headline.yaml)."""
    spec = yaml.safe_load((HERE / "headline.yaml").read_text())
    return {s["yaml"]: {row["runs"][i] for row in spec["rows"] if row["runs"][i]}
            for i, s in enumerate(spec["samples"])}


def draw(out: Path) -> Path:
    # late: matplotlib is a dev dependency of this script alone
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    named = headline_runs()
    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    for ax, (title, stem) in zip(axes.flat, SAMPLES, strict=True):
        shown = points(yaml.safe_load((HERE / f"{stem}.yaml").read_text()))
        for p in shown:
            ax.scatter(p.seconds, p.em, s=36, facecolors="tab:blue" if p.compiled else "none", edgecolors="tab:blue")
            if p.run in named.get(stem, set()) or p.run in ("rta", "genread", "tor", "beam", "beam-compiled"):
                ax.annotate(p.run, (p.seconds, p.em), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{title} ({len(shown)} runs)", fontsize=10)
        ax.set_xlabel("seconds a question (each run's machine)")
        ax.set_ylabel("EM")
        ax.grid(alpha=0.3)
    fig.suptitle("EM against seconds a question: compiled filled, zero-shot hollow; replays and gold runs left out")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=PAGE_PLOT)
    print(f"wrote {draw(parser.parse_args().out)}")


if __name__ == "__main__":
    main()
