"""The model's probability of a verdict, read from token log-probabilities, and the fits on it."""

import math

import numpy as np
import pytest

from treeqa.evaluation.stats import auc
from treeqa.judging.verdicts import verdict_probability
from treeqa.lm._greedy_grammar import token_logprobs
from treeqa.teleprompt.thresholds import fit_threshold


def _step(token, logprob, top=()):
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}


def _prediction(steps):
    class Pred:
        logprobs = {"content": steps}
    return Pred()


# what the embedded model wrote for `"relevant": true` (the raw distribution prefers Python's spelling)
JSON_STEPS = [
    _step('{"', -6.6), _step("relevant", 0.0), _step('":', 0.0),
    _step(" true", -3.96, [(" True", -0.87), (" False", -0.88), (' "', -2.53), ("True", -3.59), ("False", -3.91)]),
    _step(",", 0.0), _step(' "', 0.0), _step("s", 0.0), _step("ufficient", 0.0), _step('":', 0.0),
    _step(" true", -0.43, [(" true", -0.43), (" false", -1.05), (" True", -7.27)]),
    _step("}", 0.0),
]


def test_probability_of_true_pools_every_spelling_among_the_alternatives():
    pred = _prediction(JSON_STEPS)
    true = math.exp(-0.87) + math.exp(-3.59) + math.exp(-3.96)  # " True", "True", and the chosen " true"
    false = math.exp(-0.88) + math.exp(-3.91)
    assert verdict_probability(pred, "relevant") == pytest.approx(true / (true + false))
    p_true, p_false = math.exp(-0.43), math.exp(-1.05) + 0  # " True" at -7.27 counts too
    p_true += math.exp(-7.27)
    assert verdict_probability(pred, "sufficient") == pytest.approx(p_true / (p_true + p_false))


def test_chat_format_and_missing_values():
    steps = [_step("[[ ## relevant ## ]]", 0.0), _step("\n", 0.0),
             _step("False", -0.2, [("False", -0.2), ("True", -1.7)]), _step("\n\n", 0.0)]
    assert verdict_probability(_prediction(steps), "relevant") == pytest.approx(
        math.exp(-1.7) / (math.exp(-1.7) + math.exp(-0.2)))
    assert verdict_probability(_prediction(steps), "sufficient") is None  # not in the reply
    assert verdict_probability(_prediction([]), "relevant") is None
    assert verdict_probability(object(), "relevant") is None  # no log-probabilities at all


def test_a_true_inside_another_field_is_not_the_verdict():
    steps = [_step('{"analysis": "it is', 0.0), _step(" true", -0.1, [(" true", -0.1)]), _step('", "relevant":', 0.0),
             _step(" false", -0.3, [(" false", -0.3), (" true", -1.4)]), _step("}", 0.0)]
    assert verdict_probability(_prediction(steps), "relevant") == pytest.approx(
        math.exp(-1.4) / (math.exp(-1.4) + math.exp(-0.3)))


def test_auc_by_hand():
    assert auc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert auc([0.1, 0.9], [True, False]) == 0.0
    assert auc([0.5, 0.5], [True, False]) == 0.5
    assert auc([0.9, 0.4, 0.6, 0.2], [True, True, False, False]) == 0.75  # 3 of 4 pairs ordered
    assert auc([0.3], [True]) is None


def test_threshold_separates_and_sits_between_scores():
    threshold, balanced = fit_threshold([0.9, 0.7, 0.4, 0.2, 0.1], [True, True, False, False, False])
    assert threshold == pytest.approx(0.55) and balanced == 1.0
    # 3 negatives, 1 positive: balanced accuracy weighs the rare class up
    threshold, balanced = fit_threshold([0.9, 0.8, 0.6, 0.3], [False, True, False, False])
    assert threshold == pytest.approx(0.7) and balanced == pytest.approx(0.5 * (1 + 2 / 3), abs=1e-4)
    with pytest.raises(ValueError, match="both"):
        fit_threshold([0.2, 0.4], [True, True])


def test_engine_log_probabilities_match_a_full_softmax():
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal(151_936) * 3).astype(np.float32)
    logits[7] = 20.0
    token, logprob, top = token_logprobs(logits, 7, 10)
    exact = logits.astype(np.float64) - np.log(np.exp(logits.astype(np.float64) - 20.0).sum()) - 20.0
    assert token == 7 and logprob == pytest.approx(exact[7], abs=1e-5)
    assert [t for t, _ in top] == list(np.argsort(-exact)[:10])
    assert all(lp == pytest.approx(exact[t], abs=1e-5) for t, lp in top)
    assert token_logprobs(logits, 7, 0)[2] == []


def _balanced(scores, labels, cut):
    pos, neg = sum(labels), len(labels) - sum(labels)
    tp = sum(1 for s, y in zip(scores, labels, strict=True) if y and s >= cut)
    tn = sum(1 for s, y in zip(scores, labels, strict=True) if not y and s < cut)
    return round(0.5 * (tp / pos + tn / neg), 4)


def test_the_fitted_cut_is_the_highest_of_the_best_balanced_accuracy():
    """Brute force over every cut at a distinct score: the fit keeps the best balanced accuracy
    (scikit-learn's ROC curve), and among equal ones the highest cut (accepting the fewest)."""
    import random

    from treeqa.teleprompt.thresholds import fit_threshold

    rng = random.Random(0)
    for _ in range(300):
        scores = [round(rng.random(), 2) for _ in range(rng.randint(2, 30))]
        labels = [rng.random() < 0.4 for _ in scores]
        if all(labels) or not any(labels):
            continue
        cut, score = fit_threshold(scores, labels)
        best = max([0.5] + [_balanced(scores, labels, s) for s in set(scores)])
        assert score == best
        if best > 0.5:  # the cut does as well, and no higher one does: its lowest kept score is the best cut
            lowest_kept = min(s for s in scores if s >= cut)
            assert _balanced(scores, labels, cut) == best
            assert not any(_balanced(scores, labels, s) == best and s > lowest_kept for s in set(scores))
