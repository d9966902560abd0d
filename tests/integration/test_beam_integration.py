"""BeamSearchQA and two baselines on real HotpotQA dev questions: the embedded model and the
dense retriever over the pooled corpus. The NQ preset cut to depth 1 (at most 19 LM calls a
question) keeps it to a few minutes.

Run under the shared CPU lock:
    flock /tmp/treeqa-cpu.lock .venv/bin/python -m pytest tests/integration/test_beam_integration.py -s -q
"""

import json

import pytest

from tests.fakes import requires_shared_data, run_measured
from treeqa.data.corpus import Passage
from treeqa.evaluation.metrics import exact_match, recall_at_k
from treeqa.programs.baselines import DirectAnswer, RetrieveThenAnswer
from treeqa.programs.beam_search import BeamSearchQA

pytestmark = [pytest.mark.integration, requires_shared_data]


def _summary(program, example, pred, measured: dict) -> dict:
    """One question's figures as this module prints them (`run_measured` measures and prints)."""
    summary = {
        "program": type(program).__name__, "question": example.question, "gold": list(example.answers),
        "answer": pred.answer, "em": exact_match(pred.answer, example.answers), **measured,
        "failures": [f["where"] + ": " + f["error"] for f in pred.failures],
    }
    if "retrieved" in pred:
        summary["recall@10"] = recall_at_k([p.id for p in pred.retrieved], example.gold_ids, 10)
    if "tree" in pred:
        summary.update(confidence=pred.confidence, stop=pred.tree["stop"], states=len(pred.tree["states"]))
    return summary


def test_beam_search_on_real_questions(real_hotpot):
    lm, retriever, examples = real_hotpot
    program = BeamSearchQA.preset("nq", retriever, depth=1)
    answered = 0
    for example in examples:
        pred, summary = run_measured(program, lm, example, _summary)
        tree = json.loads(json.dumps(pred.tree))
        states = tree["states"]
        assert isinstance(pred.answer, str) and 0.0 <= pred.confidence <= 1.0
        assert [s["depth"] for s in states[:2]] == [0, 0]  # the two seeds
        assert all(s["depth"] <= 1 for s in states)
        assert len(states) <= 2 + 2 * 2
        assert summary["lm_calls"] >= 5 + len(pred.failures) and summary["lm_calls"] <= 19 + len(pred.failures)
        assert pred.retrieved and all(isinstance(p, Passage) for p in pred.retrieved)
        assert len({p.id for p in pred.retrieved}) == len(pred.retrieved)
        assert tree["best"] is None or states[tree["best"]]["answer"] == pred.answer
        answered += bool(pred.answer)
    assert answered >= 2


def test_baselines_on_real_questions(real_hotpot):
    lm, retriever, examples = real_hotpot
    for program in (DirectAnswer(), RetrieveThenAnswer(retriever, k=5)):
        answers = [run_measured(program, lm, example, _summary)[0].answer for example in examples]
        assert sum(bool(a) for a in answers) >= 2
