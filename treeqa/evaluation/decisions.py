"""How the searches decided, measured against the annotations, not only by the final answer.

A search method is only as good as its decisions: Tree of Reviews must accept a path only
when it holds every supporting paragraph, search on when a path holds part of them, and
reject distractors; the beam must score right answers above wrong ones and stop where it
should. These figures read the trees that evaluation records keep, with the examples'
gold paragraph ids (`gold_ids`) and answers, so they can be computed for any finished run.

ToR / CoR, per reviewed node (its path: the paragraphs from the root to it; for CoR, every
paragraph the turn's review saw):
- a *full* path holds every gold paragraph, a *partial* one some, and a node whose own
  (newest) paragraph is not gold judges a *distractor* (CoR: a path without any gold);
- accept precision: accepted paths that are full; accept rate on full paths; search rate on
  partial paths; reject rate on distractors;
- tree depth histogram (deepest reviewed node per question) and the share of questions with
  any expansion;
- where the reviews carry the model's verdict probabilities: how well P(relevant) separates
  gold paragraphs from distractors and P(sufficient) full paths from partial ones (AUC).

Beam, per question: where the search stopped (`stop`) and how deep its last beam is; the
share of beams whose two best states tie on confidence; calibration of Score's
confidence against each answered state's EM (Brier score, and the expected calibration
error over 10 equal-width bins); and how often some state of the tree had a right answer,
and how often the answer returned was right when one had (what a better ranking could win).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from treeqa.evaluation.metrics import exact_match
from treeqa.evaluation.stats import auc
from treeqa.programs import PROGRAMS

CALIBRATION_BINS = 10


def _share(hits: int, total: int) -> float | None:
    return round(100 * hits / total, 2) if total else None


def _review_paths(tree: dict, chain: bool) -> Iterable[tuple[dict, list[str]]]:
    """(node, path ids) for every reviewed node of a ToR tree or CoR chain."""
    nodes = tree.get("nodes") or []
    for node in nodes:
        if node.get("action") not in ("accept", "search", "reject") or node.get("relevant") is None:
            continue  # the root, pruned nodes, failed reviews
        if chain:
            yield node, list(node.get("ids") or [])
            continue
        path, current = [], node
        while current is not None and current.get("id") is not None:
            path.append(current["id"])
            parent = current.get("parent")
            current = nodes[parent] if parent is not None else None
        yield node, path[::-1]


def review_decisions(records: Sequence[dict], gold: Mapping[str, Sequence[str]], chain: bool = False) -> dict:
    """Review agreement with the annotations and tree shape for ToR (or CoR with `chain`).

    Args:
        records: evaluation records with their `tree`.
        gold: question id -> gold paragraph ids; questions without any are skipped.
        chain: the records are Chain of Reviews turns (each node lists the paragraphs it saw).
    """
    counts: Counter = Counter()
    depths: Counter = Counter()
    expanded_questions = questions = 0
    # (scores, labels) per verdict and source: the model's own probabilities, a path judge's
    scored = {key: ([], []) for key in ("p_relevant", "p_sufficient", "judge_relevant", "judge_sufficient")}
    for record in records:
        tree, gold_ids = record.get("tree"), set(gold.get(record["id"]) or ())
        if not tree or not gold_ids:
            continue
        questions += 1
        deepest, any_expansion = 0, False
        for node, path in _review_paths(tree, chain):
            deepest = max(deepest, int(node.get("depth") or 0))
            any_expansion |= bool(node.get("expanded"))
            _count_review(node, path, gold_ids, chain, counts, scored)
        depths[deepest] += 1
        expanded_questions += any_expansion
    judged = {} if not scored["judge_relevant"][0] else {
        "judge_relevance_auc": _rounded(auc(*scored["judge_relevant"])),
        "judge_sufficiency_auc": _rounded(auc(*scored["judge_sufficient"]))}
    return {
        "questions": questions,
        "reviews": counts["reviewed"],
        "actions": {a: counts[a] for a in ("accept", "search", "reject")},
        "accept_precision": _share(counts["full_accept"], counts["accept"]),
        "accept_rate_on_full_paths": _share(counts["full_accept"], counts["full"]),
        "search_rate_on_partial_paths": _share(counts["partial_search"], counts["partial"]),
        "reject_rate_on_distractors": _share(counts["distractor_reject"], counts["distractor"]),
        "paths": {"full": counts["full"], "partial": counts["partial"], "distractor": counts["distractor"]},
        "depth_histogram": {str(d): depths[d] for d in sorted(depths)},
        "questions_with_expansion": _share(expanded_questions, questions),
        "relevance_auc": _rounded(auc(*scored["p_relevant"])),
        "sufficiency_auc": _rounded(auc(*scored["p_sufficient"])),
        **judged,
    }


def _count_review(node: dict, path: list[str], gold_ids: set[str], chain: bool, counts: Counter,
                  scored: dict[str, tuple[list, list]]) -> None:
    """Count one reviewed node into `counts` (its action by the kind of path) and `scored`
    (its verdict probabilities against the annotations)."""
    held = gold_ids & set(path)
    action = node["action"]
    counts["reviewed"] += 1
    counts[f"{action}"] += 1
    if held == gold_ids:
        counts["full"] += 1
        counts[f"full_{action}"] += 1
    elif held:
        counts["partial"] += 1
        counts[f"partial_{action}"] += 1
    own_is_gold = bool(held) if chain else path[-1] in gold_ids
    for source in ("p", "judge"):
        if node.get(f"{source}_relevant") is not None:
            scored[f"{source}_relevant"][0].append(node[f"{source}_relevant"])
            scored[f"{source}_relevant"][1].append(own_is_gold)
        if node.get(f"{source}_sufficient") is not None and held:
            scored[f"{source}_sufficient"][0].append(node[f"{source}_sufficient"])
            scored[f"{source}_sufficient"][1].append(held == gold_ids)
    if not own_is_gold:
        counts["distractor"] += 1
        counts[f"distractor_{action}"] += 1


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def calibration(confidences: Sequence[float], correct: Sequence[float], bins: int = CALIBRATION_BINS) -> dict:
    """Brier score and expected calibration error (equal-width bins) of confidences vs 0/1 outcomes."""
    if len(confidences) != len(correct):
        raise ValueError("one outcome per confidence")
    n = len(confidences)
    if not n:
        return {"states": 0, "brier": None, "ece": None}
    brier = sum((c - y) ** 2 for c, y in zip(confidences, correct, strict=True)) / n
    ece = 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        members = [(c, y) for c, y in zip(confidences, correct, strict=True)
                   if low <= c < high or (b == bins - 1 and c == 1.0)]
        if members:
            gap = abs(sum(c for c, _ in members) / len(members) - sum(y for _, y in members) / len(members))
            ece += len(members) / n * gap
    return {"states": n, "brier": round(brier, 4), "ece": round(ece, 4),
            "mean_confidence": round(sum(confidences) / n, 4), "accuracy": round(sum(correct) / n, 4)}


def beam_decisions(records: Sequence[dict]) -> dict:
    """Where beam searches stopped, ties at the top of beams, and Score's calibration. A judged
    beam's tree with only its answering state read (`pick="beam"`) gives no per-state EM: it counts
    in the stops and ties, not in the calibration or the right-in-tree shares."""
    stops: Counter = Counter()
    depths: Counter = Counter()
    beams = ties = 0
    confidences, correct = [], []
    right_somewhere = right_returned = answered_one = 0
    for record in records:
        tree = record.get("tree")
        if not tree or "states" not in tree:
            continue
        states = {s["id"]: s for s in tree["states"]}
        stops[tree.get("stop", "?")] += 1
        depths[len(tree.get("beams") or []) - 1] += 1
        for beam in tree.get("beams") or []:
            if len(beam) >= 2:
                beams += 1
                ties += states[beam[0]]["confidence"] == states[beam[1]]["confidence"]
        if any(s.get("answer") is None and s["status"] != "failed" for s in tree["states"]):
            answered_one += 1  # a judged beam read only the state that answered: no per-state EM
            continue
        right = 0.0
        for state in tree["states"]:
            if state["status"] != "failed" and state.get("answer"):
                confidences.append(float(state["confidence"]))
                correct.append(exact_match(state["answer"], record["answers"]))
                right = max(right, correct[-1])
        right_somewhere += right == 1.0
        right_returned += right == 1.0 and record.get("em") == 1.0
    questions = sum(stops.values())
    return {
        "questions": questions,
        "stop_reasons": dict(stops.most_common()),
        "last_beam_depth_histogram": {str(d): depths[d] for d in sorted(depths)},
        "top_two_tied": _share(ties, beams),
        "beams_with_two_states": beams,
        "score_calibration": calibration(confidences, correct),
        "trees_read_at_one_state": answered_one,  # left out of the calibration and the two shares below
        "right_in_tree": _share(right_somewhere, questions - answered_one),
        "right_returned_when_in_tree": _share(right_returned, right_somewhere),
    }


def decisions(program: str, records: Sequence[dict], gold: Mapping[str, Sequence[str]]) -> dict | None:
    """The decision figures that fit `program`'s search tree (its declared `tree_shape`); None for
    programs that do not search."""
    shape = PROGRAMS[program].tree_shape if program in PROGRAMS else None
    if shape in ("reviews", "chain"):
        return review_decisions(records, gold, chain=shape == "chain")
    if shape == "states":
        return beam_decisions(records)
    return None


def percent(value: float | None) -> str:
    """A share as "12.5%", or "–" where nothing was there to count (no full path was reviewed)."""
    return "–" if value is None else f"{value}%"


def describe(figures: dict) -> str:
    """One line of the figures for a terminal or a report."""
    if "score_calibration" in figures:
        cal = figures["score_calibration"]
        return (f"stops {figures['stop_reasons']}; last beam depth {figures['last_beam_depth_histogram']}; "
                f"top two tied in {figures['top_two_tied']}% of beams; Score vs state EM over {cal['states']} "
                f"states: Brier {cal['brier']}, ECE {cal['ece']}; a right answer in the tree on "
                f"{percent(figures['right_in_tree'])} of questions, returned on "
                f"{percent(figures['right_returned_when_in_tree'])} of those"
                + (f" ({figures['trees_read_at_one_state']} judged trees read at their answering state only, "
                   "left out of both)" if figures.get("trees_read_at_one_state") else ""))
    a = figures["actions"]
    return (f"{figures['reviews']} reviews (accept {a['accept']} / search {a['search']} / reject {a['reject']}); "
            f"accept precision {percent(figures['accept_precision'])}, accepted on full paths "
            f"{percent(figures['accept_rate_on_full_paths'])}, "
            f"search on partial paths {percent(figures['search_rate_on_partial_paths'])}, "
            f"reject on distractors {percent(figures['reject_rate_on_distractors'])}; questions with an expansion "
            f"{percent(figures['questions_with_expansion'])}; deepest node per question {figures['depth_histogram']}; "
            f"AUC of P(relevant) on gold vs distractor {figures.get('relevance_auc')}, "
            f"of P(sufficient) on full vs partial paths {figures.get('sufficiency_auc')}"
            + (f"; the path judge's AUC on relevance {figures['judge_relevance_auc']}, "
               f"on sufficiency {figures['judge_sufficiency_auc']}" if "judge_relevance_auc" in figures else ""))
