"""Uncertainty of QA figures: bootstrap intervals for one run, paired tests for two.

On 30 questions one question moves EM by 3.3 points, so a figure without its interval
says little. A run's EM/F1 gets a seeded percentile-bootstrap 95% interval over its
questions; two runs on the same questions get the paired difference with a paired
bootstrap interval, the won/lost/tied counts, and the exact McNemar (sign) test on EM.
A difference is called "better"/"worse" only when its interval excludes 0 and the sign test
on the questions won and lost agrees (p < 0.05): a bootstrap over a handful of questions can
exclude 0 (over one question it always does), the sign test cannot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from treeqa.data.answers import RECALL_K

RESAMPLES = 10_000
LEVEL = 0.95
NO_DIFFERENCE = "no significant difference"
PAIRED_KEYS = ("em", "f1", f"recall@{RECALL_K}")  # what reports pair: recall adds the reading-given-gold figure


def _array(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} needs a non-empty list of per-question values")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: per-question values must be finite numbers")
    return arr


def bootstrap_ci(values: Sequence[float], resamples: int = RESAMPLES, level: float = LEVEL,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of `values` (resampling questions): SciPy's
    `stats.bootstrap`, seeded (the same intervals as the committed runs' own resampling gave)."""
    arr = _array(values, "bootstrap_ci")
    if np.all(arr == arr[0]):  # one question, or all alike: every resample has the same mean
        return float(arr[0]), float(arr[0])
    result = stats.bootstrap((arr,), np.mean, n_resamples=resamples, confidence_level=level, method="percentile",
                             rng=np.random.default_rng(seed), vectorized=True)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mcnemar_exact(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: the sign test on the discordant pairs.

    Under no difference each discordant question is a fair coin; the p-value is the chance
    of a split at least as lopsided as `wins` vs `losses`. Ties carry no information.
    """
    if wins < 0 or losses < 0:
        raise ValueError("counts must be non-negative")
    if wins + losses == 0:
        return 1.0
    return float(stats.binomtest(min(wins, losses), wins + losses, 0.5).pvalue)


def questions_needed(wins: int, losses: int, n: int, power: float = 0.8, level: float = LEVEL) -> int | None:
    """How many questions a paired EM comparison needs for a difference the size measured, with the
    same share of questions won and lost, to have its interval above 0 with the chance `power`.
    None where nothing was won or lost on balance: there is no difference to plan for. Why: on 100
    questions an interval is about 10 points wide, so a target of "+8 with the interval above 0" is
    a sample size as much as a program; this says which of the two a comparison lacks."""
    _check_counts(wins, losses, n)
    return questions_for((wins - losses) / n, (wins + losses) / n, power, level)


def questions_for(diff: float, discordant: float, power: float = 0.8, level: float = LEVEL) -> int | None:
    """`questions_needed` for a difference `diff` (a fraction: 0.08 is +8 EM) where the share
    `discordant` of the questions is won or lost (the normal approximation of the paired mean,
    each question scoring +1, -1 or 0); None for no difference."""
    if not 0 < power < 1:
        raise ValueError(f"power is a probability, got {power}")
    if not abs(diff) <= discordant <= 1:
        raise ValueError(f"a difference of {diff} needs at least that share of questions won or lost, got {discordant}")
    if diff == 0:
        return None
    spread = discordant - diff * diff  # the variance of one question's difference
    z = stats.norm.ppf(1 - (1 - level) / 2) + stats.norm.ppf(power)
    return max(1, math.ceil(spread * (z / diff) ** 2))


def _check_counts(wins: int, losses: int, n: int) -> None:
    if n < 1 or wins < 0 or losses < 0 or wins + losses > n:
        raise ValueError(f"need 0 <= wins + losses <= n and n >= 1, got {wins} won, {losses} lost of {n}")


def smallest_shown(wins: int, losses: int, n: int, level: float = LEVEL) -> float:
    """The smallest EM difference (points) whose interval would just clear 0 on these `n` questions
    at the share of them won or lost here (the normal approximation): what the sample can show."""
    _check_counts(wins, losses, n)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    return 100 * z * math.sqrt((wins + losses) / n / (n + z * z))


def verdict(ci: tuple[float, float]) -> str:
    """'better' / 'worse' when the interval of the difference excludes 0 (`paired_comparison` also
    requires the exact McNemar test to agree)."""
    low, high = ci
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return NO_DIFFERENCE


def paired_comparison(a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES,
                      level: float = LEVEL, seed: int = 0) -> dict:
    """A vs B on the same questions, in the same order (per-question scores, e.g. EM 0/1).

    Returns the mean difference A - B and its paired-bootstrap interval (both in the units
    of the inputs), the questions A won / lost / tied, the exact McNemar p-value (the sign
    test on won and lost; McNemar's for 0/1 scores) and the verdict for A (see the module doc).
    """
    x, y = _array(a, "paired_comparison"), _array(b, "paired_comparison")
    if x.size != y.size:
        raise ValueError(f"paired runs need the same questions: {x.size} vs {y.size} values")
    diff = x - y
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    ci = bootstrap_ci(diff, resamples, level, seed)
    p_sign = mcnemar_exact(wins, losses)
    return {"n": int(x.size), "diff": float(diff.mean()), "ci": ci, "wins": wins, "losses": losses,
            "ties": int(x.size - wins - losses), "p_mcnemar": p_sign,
            "verdict": verdict(ci) if p_sign < 1 - level else NO_DIFFERENCE}


def run_intervals(records: Sequence[dict], keys: Sequence[str] = ("em", "f1"), seed: int = 0) -> dict:
    """`{key}_ci` in percent for each per-question score in `records`."""
    out = {}
    for key in keys:
        values = [r[key] for r in records if key in r]
        if values:
            low, high = bootstrap_ci(values, seed=seed)
            out[f"{key}_ci"] = [round(100 * low, 2), round(100 * high, 2)]
    return out


def compare_records(a: Sequence[dict], b: Sequence[dict], keys: Sequence[str] = ("em", "f1"),
                    seed: int = 0) -> dict:
    """Paired comparison of two runs' records, matched by question id; figures in percent.

    Only questions both runs answered are compared; `n` says how many. With recall@15 among
    the keys, `em_given_all_gold` compares the two readers where both searches had every gold
    paragraph in their first 15 passages, so a search that finds more is not credited for it:
    what is left is how well each program answers from evidence that holds the answer;
    `em_where_only_a_saw_all_gold` compares them where A's search had every gold paragraph and B's
    did not: whether what A's search found more turned into answers.
    """
    by_id = {r["id"]: r for r in b}
    common = [(r, by_id[r["id"]]) for r in a if r["id"] in by_id]
    if not common:
        raise ValueError("the two runs share no question")
    out: dict = {"n": len(common)}
    for key in keys:
        pairs = [(x[key], y[key]) for x, y in common if key in x and key in y]
        if not pairs:
            continue
        cmp = paired_comparison([p[0] for p in pairs], [p[1] for p in pairs], seed=seed)
        entry = {"diff": round(100 * cmp["diff"], 2), "ci": [round(100 * c, 2) for c in cmp["ci"]],
                 "wins": cmp["wins"], "losses": cmp["losses"], "ties": cmp["ties"], "verdict": cmp["verdict"]}
        if key == "em":
            entry["p_mcnemar"] = round(cmp["p_mcnemar"], 4)
            entry["questions_needed"] = questions_needed(cmp["wins"], cmp["losses"], cmp["n"])
        out[key] = entry
    recall = f"recall@{RECALL_K}"
    if recall in keys:
        groups = {"em_given_all_gold": lambda x, y: x.get(recall) == 1.0 and y.get(recall) == 1.0,
                  "em_where_only_a_saw_all_gold": lambda x, y: x.get(recall) == 1.0 and y.get(recall, 1.0) < 1.0}
        for name, member in groups.items():
            group = [(x, y) for x, y in common if member(x, y)]
            if group:
                cmp = paired_comparison([x["em"] for x, _ in group], [y["em"] for _, y in group], seed=seed)
                out[name] = {"n": len(group), "a": round(100 * sum(x["em"] for x, _ in group) / len(group), 2),
                             "b": round(100 * sum(y["em"] for _, y in group) / len(group), 2),
                             "ci": [round(100 * c, 2) for c in cmp["ci"]],
                             "p_mcnemar": round(cmp["p_mcnemar"], 4), "verdict": cmp["verdict"]}
    return out


def describe(cmp: dict, key: str = "em") -> str:
    """One line for a table cell: '+6.0 [-1.0, 13.0] (9 won / 3 lost, p=0.146): no significant difference'."""
    e = cmp[key]
    p = f", p={e['p_mcnemar']:.3g}" if "p_mcnemar" in e else ""
    return (f"{e['diff']:+.2f} [{e['ci'][0]:+.2f}, {e['ci'][1]:+.2f}] "
            f"({e['wins']} won / {e['losses']} lost{p}): {e['verdict']}")


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance a random positive scores above a random negative
    (ties count half). None without both classes."""
    from sklearn.metrics import roc_auc_score  # scikit-learn is heavy: loaded for the first AUC

    labels = [bool(y) for y in labels]
    if len(labels) != len(scores):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    if all(labels) or not any(labels):
        return None
    return float(roc_auc_score(labels, scores))
