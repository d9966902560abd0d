"""`--optimizer path-judge`: the path judge (`treeqa.judging.path_judge`) fitted on paths built
from the training annotations (gold paragraphs, partial and full gold paths, distractors spliced
in) with the encoder and no LM call; `PathJudgeFit` adds the annotated demos first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import dspy
import numpy as np
from dspy.teleprompt import Teleprompter

from treeqa.data.passage import Passage
from treeqa.evaluation.stats import auc
from treeqa.judging.path_judge import Logit, PathJudge, path_features, stopword_set
from treeqa.retrievers.encoder import EmbedFn
from treeqa.teleprompt.annotated_demos import AnnotatedFewShot, as_passage, usable
from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.thresholds import fit_threshold, recall_threshold

DISTRACTORS_PER_QUESTION = 3  # distractors spliced into paths per training question
# Relevance is cut to keep this share of gold paragraphs (cross-validated on train): a gold
# paragraph rejected loses its subtree, a distractor kept costs a few calls. Sufficiency is
# cut at its best balanced accuracy.
RELEVANCE_RECALL = 0.9
PLANNED_JUDGE = {"planned": True}  # what `--plan` bounds with: a judge is there, its numbers come from the fit
def _passage(paragraph: dict) -> Passage:
    return as_passage(paragraph)


def judge_cases(examples: Sequence[dspy.Example], seed: int = 0) -> list[tuple[str, list[Passage], bool, bool]]:
    """(question, path, newest paragraph relevant, path sufficient) from the annotations.

    Per annotated question with gold paragraphs G (in annotation order) and up to three
    seeded distractors D: every gold paragraph alone and every prefix of G (relevant, not
    sufficient), G and G reversed (relevant, sufficient); per distractor d: d alone and G's
    first paragraph then d (neither), d then G's first paragraph (relevant, not sufficient);
    and the longer paths a deeper tree meets, so that length alone says nothing: d then G,
    and G with d inside (relevant, sufficient), two distractors then G's first paragraph
    (relevant, not sufficient), G's first paragraph then two distractors (neither)."""
    rng = random.Random(seed)
    cases = []
    for example in examples:
        if not usable(example):
            continue
        gold = [_passage(p) for p in example.annotation["gold"]]
        distractors = [_passage(p) for p in example.annotation["distractors"]]
        rng.shuffle(distractors)
        distractors = distractors[:DISTRACTORS_PER_QUESTION]
        q = example.question
        cases += [(q, [g], True, False) for g in gold]
        cases += [(q, gold[:k], True, False) for k in range(2, len(gold))]
        cases += [(q, gold, True, True), (q, gold[::-1], True, True)]
        for d in distractors:
            cases += [(q, [d], False, False), (q, [gold[0], d], False, False), (q, [d, gold[0]], True, False)]
            cases += [(q, [*gold[:-1], d], False, False)] if len(gold) > 2 else []
        if distractors:
            d = distractors[0]
            cases += [(q, [d, *gold], True, True), (q, [gold[0], d, *gold[1:]], True, True)]
        if len(distractors) > 1:
            cases += [(q, [*distractors[:2], gold[0]], True, False), (q, [gold[0], *distractors[:2]], False, False)]
    return cases


def case_features(cases: Sequence[tuple[str, list[Passage], bool, bool]], embed_fn: EmbedFn) -> np.ndarray:
    """The features of every case, embedding each distinct text once."""
    texts = list(dict.fromkeys(t for q, path, _, _ in cases for t in [q, *(p.as_text() for p in path)]))
    vectors = np.asarray(embed_fn(texts), dtype=np.float32)
    row = {t: i for i, t in enumerate(texts)}
    stopwords = stopword_set()
    return np.stack([path_features(q, path, vectors[[row[q], *(row[p.as_text()] for p in path)]], stopwords)
                     for q, path, _, _ in cases])


def _fit_logit(x: np.ndarray, y: np.ndarray, seed: int, min_recall: float | None = None) -> tuple[Logit, float]:
    """A balanced logistic regression and its cross-validated AUC; the threshold is the
    cross-validated cut with the best balanced accuracy, or with `min_recall` the highest
    cut that keeps that share of the true cases."""
    # scikit-learn is heavy (~1 s): loaded when a judge is fitted, not by every command
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def model():
        return make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=1000))

    folds = StratifiedKFold(n_splits=min(5, int(min(y.sum(), (~y).sum()))), shuffle=True, random_state=seed)
    held_out = cross_val_predict(model(), x, y, cv=folds, method="predict_proba")[:, 1]
    if min_recall is None:
        threshold, _ = fit_threshold(held_out.tolist(), y.tolist())
    else:
        threshold = recall_threshold(held_out.tolist(), y.tolist(), min_recall)
    fitted = model().fit(x, y)
    scaler, logit = fitted[0], fitted[1]
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    return (Logit(mean=scaler.mean_.tolist(), scale=scale.tolist(), coef=logit.coef_[0].tolist(),
                  intercept=float(logit.intercept_[0]), threshold=threshold),
            auc(held_out.tolist(), y.tolist()))


def fit_path_judge(examples: Sequence[dspy.Example], embed_fn: EmbedFn, seed: int = 0,
                   relevance_recall: float = RELEVANCE_RECALL) -> tuple[PathJudge, dict]:
    """Fit both decisions on the annotated `examples`; returns the judge and its figures
    (cases, positives, 5-fold cross-validated AUC on train, the thresholds)."""
    cases = judge_cases(examples, seed)
    if not cases:
        raise ValueError(f"none of the {len(examples)} training questions has two or more annotated gold "
                         "paragraphs (hotpotqa, 2wikimultihopqa and musique have them)")
    x = case_features(cases, embed_fn)
    relevant = np.array([c[2] for c in cases])
    sufficient = np.array([c[3] for c in cases])
    relevance, relevance_auc = _fit_logit(x, relevant, seed, min_recall=relevance_recall)
    sufficiency, sufficiency_auc = _fit_logit(x, sufficient, seed)
    figures = {"cases": len(cases), "relevant": int(relevant.sum()), "sufficient": int(sufficient.sum()),
               "relevance_auc_cv": round(relevance_auc, 3), "sufficiency_auc_cv": round(sufficiency_auc, 3),
               "relevance_threshold": round(relevance.threshold, 4),
               "sufficiency_threshold": round(sufficiency.threshold, 4)}
    return PathJudge(relevance=relevance, sufficiency=sufficiency), figures


def judge_figures(judge: PathJudge, examples: Sequence[dspy.Example], embed_fn: EmbedFn, seed: int = 0) -> dict:
    """How the judge separates the annotated paths of `examples` (held-out questions): AUC
    and balanced accuracy at its thresholds, for each decision."""
    cases = judge_cases(examples, seed)
    x = case_features(cases, embed_fn)
    out = {"cases": len(cases)}
    for name, logit, col in (("relevance", judge.relevance, 2), ("sufficiency", judge.sufficiency, 3)):
        y = np.array([c[col] for c in cases])
        p = logit.probability(x)
        said = p >= logit.threshold
        balanced = (said[y].mean() + (~said[~y]).mean()) / 2
        out[name] = {"auc": round(auc(p.tolist(), y.tolist()), 3), "balanced_accuracy": round(float(balanced), 3),
                     "recall": round(float(said[y].mean()), 3), "specificity": round(float((~said[~y]).mean()), 3),
                     "positives": int(y.sum())}
    return out


class PathJudgeFit(Teleprompter):
    """Annotated demos, then a `PathJudge` fitted on the train annotations (no LM call).

    For programs with a `path_judge` setting (tor, beam). The fit's figures are kept on the
    compiled program as `judge_fit`, which the optimize report carries.
    """

    def __init__(self, k: int = 3, seed: int = 0):
        self.k, self.seed = k, seed

    def compile(self, student: dspy.Module, *, trainset: Sequence[dspy.Example], teacher=None,
                valset=None, **kwargs) -> dspy.Module:
        if not hasattr(student, "path_judge"):
            raise ValueError(f"--optimizer path-judge: {type(student).__name__} has no path judge (tor and beam have)")
        program = AnnotatedFewShot(k=self.k, seed=self.seed).compile(student, trainset=trainset)
        judge, figures = fit_path_judge(trainset, program.judge_embed_fn(), self.seed)
        program.path_judge = judge.model_dump()
        program.judge_fit = figures
        return program


def _no_passages(cls: type, settings: dict) -> str | None:
    """The judge scores retrieved paragraphs: a program set to retrieve none (the beam with the
    paper's GENREAD evidence, its TriviaQA and WebQ presets) has nothing for it to judge."""
    if cls.needs_retriever(settings):
        return None
    shown = ", ".join(f"{k}={v}" for k, v in settings.items() if k == "evidence") or "these settings"
    return (f"with {shown} it retrieves no passages for the judge to score (use --param evidence=retrieval, "
            "or a compiler that needs no passages, such as annotated)")


register(Compiler("path-judge", lambda c: (PathJudgeFit(k=c.spec.annotated_demos, seed=c.spec.seed), {}),
                  lambda per_q, n, t: 0, preparer=True, needs_annotations=True, from_annotations=True,
                  fits=lambda cls: "path_judge" in cls.settings_model().model_fields, unfit="has no path judge",
                  refuses=_no_passages, sets=lambda cls, settings: {"path_judge": PLANNED_JUDGE}))
