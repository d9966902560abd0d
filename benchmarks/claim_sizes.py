"""How many questions each open EM target needs, from the committed paired comparisons.

    python benchmarks/claim_sizes.py > benchmarks/claim_sizes.md

Why: issues 86 and 88 ask for the compiled programs to beat rta by a set margin with the 95%
interval above 0 on samples of 100 and 197 questions. Whether a miss is the program's or the
sample's is a sample-size question: at the share of questions won or lost that a comparison
measured, the sample can show a difference no smaller than some size, and a difference of the size
measured needs some number of questions to show at 80% power (`treeqa.evaluation.stats`). The
reading ceilings beside them are rta's reader given only each question's gold paragraphs on the
same sample: what any search read by that reader approaches at best.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from treeqa.evaluation.stats import questions_for, questions_needed, smallest_shown  # noqa: E402

HERE = Path(__file__).parent
# (sample YAML, its title, the comparison, the target in EM points: None for "above 0")
TARGETS = (
    ("hotpotqa-dev-unexamined-skip100-n197", "HotpotQA dev 197", "tor-priced-compile vs rta", 8),
    ("hotpotqa-dev-unexamined-skip100-n197", "HotpotQA dev 197", "tor-default-compile vs rta", 8),
    ("musique-dev-unexamined-skip0-n100", "MuSiQue dev 100", "tor-priced-compile vs rta", 8),
    ("musique-dev-unexamined-skip0-n100", "MuSiQue dev 100", "tor-default-compile vs rta", 8),
    ("2wikimultihopqa-dev-unexamined-skip50-n100", "2Wiki dev 100", "tor-priced-compile vs rta", None),
    ("2wikimultihopqa-dev-unexamined-skip50-n100", "2Wiki dev 100", "tor-default-compile vs rta", None),
    ("hotpotqa-dev-unexamined-skip100-n197", "HotpotQA dev 197", "beam-path-judge-replay-main-compile vs rta", None),
    ("nq-test100", "NQ test 100", "beam-compiled-replay-main-compile vs rta", None),
)
CEILINGS = (
    ("hotpotqa-dev-unexamined-skip100-n197", "HotpotQA dev 197", ("rta-gold vs rta", "rta-lora-v4-gold vs rta")),
    ("2wikimultihopqa-dev-unexamined-skip50-n100", "2Wiki dev 100", ("rta-gold vs rta", "rta-lora-v4-gold vs rta")),
)


def comparison(doc: dict, name: str) -> dict:
    """The EM entry of a recorded comparison, with its question count."""
    try:
        em = doc["comparisons"][name]["em"]
    except KeyError as exc:
        raise KeyError(f"no comparison {name!r} recorded") from exc
    return dict(em, n=em["wins"] + em["losses"] + em["ties"])


def row(title: str, name: str, em: dict, target: float | None) -> str:
    """One comparison: what it measured, what its sample can show, what it would take."""
    wins, losses, n = em["wins"], em["losses"], em["n"]
    shares = (wins + losses) / n
    measured = questions_needed(wins, losses, n)
    wanted = "above 0" if target is None else f"+{target} and above 0"
    if target is None:
        for_target = "–"
    else:  # the target's size at the shares measured (at least the target's own share won)
        for_target = questions_for(target / 100, max(shares, target / 100))
    low, high = em["ci"]
    return (f"| {title} | {name} | {wanted} | {em['diff']:+.1f} [{low:+.1f}, {high:+.1f}] | {wins} / {losses} of {n} "
            f"| {smallest_shown(wins, losses, n):.1f} | {measured or '–'} | {for_target} |")


def main() -> None:
    docs: dict[str, dict] = {}

    def doc(stem: str) -> dict:
        if stem not in docs:
            docs[stem] = yaml.safe_load((HERE / f"{stem}.yaml").read_text(encoding="utf-8"))
        return docs[stem]

    print("# The questions each open EM target needs (`python benchmarks/claim_sizes.py`)\n")
    print("From the committed paired comparisons (benchmarks/*.yaml), embedded model, `--no-cache`. "
          "\"Shows\": the smallest EM difference whose 95% interval clears 0 on that sample at the share of "
          "its questions won or lost there. \"Questions\": how many a difference needs to clear 0 at 80% "
          "power, at the same shares (the normal approximation of the paired mean).\n")
    print("| sample | comparison | target | EM diff [95% CI] | won / lost | the sample shows | "
          "questions for the diff measured | questions for the target |")
    print("|---|---|---|---|---|---|---|---|")
    for stem, title, name, target in TARGETS:
        print(row(title, name, comparison(doc(stem), name), target))
    print("\nReading ceilings: rta's reader (and with the v4 adapter) given only each question's gold "
          "paragraphs, against rta on its own retrieval, on the same questions:\n")
    print("| sample | comparison | EM diff [95% CI] | won / lost |")
    print("|---|---|---|---|")
    for stem, title, names in CEILINGS:
        for name in names:
            em = comparison(doc(stem), name)
            print(f"| {title} | {name} | {em['diff']:+.1f} [{em['ci'][0]:+.1f}, {em['ci'][1]:+.1f}] "
                  f"| {em['wins']} / {em['losses']} of {em['n']} |")


if __name__ == "__main__":
    main()
