"""Compiling the review's relevance judge: a threshold on the model's own P(relevant).

The written verdict of a 1.5B model is biased (it calls nearly everything relevant, or
nearly nothing, depending on the prompt), but its probability of `true` still ranks
paragraphs. `RelevanceJudge` reviews annotated training paragraphs (gold paragraphs of
multi-hop questions are relevant; their distractors are not), reads P(relevant) from each
reply, and sets the program's `relevance_threshold` to the cut that best separates them
(balanced accuracy). It first gives the program the annotated demos (`AnnotatedFewShot`), so
the threshold is fitted under the prompts the compiled program will run with. The threshold
is a setting, saved in `compiled.json` as a plain number; the fit's figures go with it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import dspy
from dspy.teleprompt import Teleprompter

from treeqa.evaluation.stats import auc
from treeqa.judging.verdicts import LOGPROBS, verdict_probability
from treeqa.programs.common import safe_call
from treeqa.signatures.review import review_paragraphs
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot, as_passage, usable
from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.thresholds import fit_threshold

DISTRACTORS_PER_QUESTION = 2


def review_cases(examples: Sequence[dspy.Example], seed: int = 0) -> list[tuple[dspy.Example, dict, bool]]:
    """(question, paragraph, relevant) to fit on: every gold paragraph, and up to
    `DISTRACTORS_PER_QUESTION` seeded distractors, of each annotated question."""
    rng = random.Random(seed)
    cases = []
    for example in examples:
        if not usable(example):
            continue
        gold, distractors = example.annotation["gold"], list(example.annotation["distractors"])
        rng.shuffle(distractors)
        cases += [(example, p, True) for p in gold]
        cases += [(example, p, False) for p in distractors[:DISTRACTORS_PER_QUESTION]]
    return cases


class RelevanceJudge(Teleprompter):
    """Annotated demos, then a relevance threshold fitted on the train annotations.

    For programs with a review (tor, cor); other programs get the annotated demos alone.
    The fit's figures (cases, AUC, balanced accuracy, failures) are kept on the compiled
    program as `judge_fit` (the optimize report and `compiled.json` carry them).

    Args:
        k: annotated demos per predictor.
        seed: which demos and distractors are used.
    """

    def __init__(self, k: int = 3, seed: int = 0):
        self.k, self.seed = k, seed

    def compile(self, student: dspy.Module, *, trainset: Sequence[dspy.Example], teacher=None,
                valset=None, **kwargs) -> dspy.Module:
        program = AnnotatedFewShot(k=self.k, seed=self.seed).compile(student, trainset=trainset)
        if not hasattr(program, "relevance_threshold") or not hasattr(program, "review"):
            return program
        cases = review_cases(trainset, self.seed)
        scores, labels, failures = [], [], []
        for example, paragraph, relevant in cases:
            texts = review_paragraphs([as_passage(paragraph)], program.max_paragraph_chars, program.max_review_chars)
            pred = safe_call(program.review, failures, "judge", question=example.question, paragraphs=texts,
                             config=LOGPROBS)
            p = verdict_probability(pred, "relevant") if pred is not None else None
            if p is not None:
                scores.append(p)
                labels.append(relevant)
        if not any(labels) or all(labels):
            raise ValueError(f"the relevance judge got probabilities for {len(scores)} of {len(cases)} training "
                             "paragraphs, not both relevant and irrelevant ones: the LM must return "
                             f"log-probabilities (failures: {failures[:3]})")
        threshold, balanced = fit_threshold(scores, labels)
        program.relevance_threshold = threshold
        program.judge_fit = {"cases": len(cases), "scored": len(scores), "relevant": sum(labels),
                             "auc": round(auc(scores, labels), 3), "balanced_accuracy": balanced,
                             "threshold": threshold, "failures": len(failures)}
        return program


register(Compiler("judge", lambda c: (RelevanceJudge(k=c.spec.annotated_demos, seed=c.spec.seed), {}),
                  lambda per_q, n, t: n * (2 + DISTRACTORS_PER_QUESTION), preparer=True, needs_annotations=True,
                  from_annotations=True,
                  fits=lambda cls: "relevance_threshold" in cls.settings_model().model_fields,
                  unfit="has no relevance threshold for a review to be judged by"))

