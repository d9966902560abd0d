"""A judge for ToR's two decisions that is not the LLM's verdict, compiled from the annotations.

On the 1.5B model the review's written verdicts are biased and its probabilities barely rank
paths (P(sufficient) separates a full gold path from a partial one with AUC 0.51 on train;
P(relevant) a gold paragraph from a distractor with 0.69). What decides relevance and
sufficiency in multi-hop questions is largely visible without a language model: a bridge
paragraph's title is named in the paragraph before it, a compared entity's title is named in
the question, and a full path covers more of the question's words than half of one.

`PathJudge` scores a path (the question and the paragraphs from the root to the node) with
two logistic regressions over a handful of such features (dense similarities from the
retriever's encoder, title links, word coverage, length): P(the newest paragraph is
relevant) and P(the path holds every supporting paragraph). `fit_path_judge` fits them on
paths built from the training annotations (gold paragraphs, partial and full gold paths,
distractors spliced in) with no LM call; the weights, the standardisation and the two
thresholds are plain numbers, saved in `compiled.json` as the program's `path_judge`
setting. `PathJudgeFit` is the teleprompter (`--optimizer path-judge`): annotated demos,
then the judge.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections.abc import Sequence

import dspy
import numpy as np
from dspy.teleprompt import Teleprompter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from treeqa.data.passage import Passage
from treeqa.retrievers.encoder import EmbedFn
from treeqa.verdicts import auc, fit_threshold, recall_threshold

FEATURES: tuple[str, ...] = (
    "question_similarity",  # cosine of the question and the newest paragraph
    "path_similarity",  # cosine of the question and the path's mean vector
    "title_in_question",  # the newest paragraph's title is named in the question
    "titles_in_question",  # share of the path's titles named in the question
    "linked",  # the newest paragraph's title is named in an earlier one, or an earlier title in it
    "coverage",  # share of the question's content words found in the path
    "coverage_gain",  # what the newest paragraph adds to that share
    "paragraphs",  # path length
)
DISTRACTORS_PER_QUESTION = 3  # distractors spliced into paths per training question
# Relevance is cut to keep this share of gold paragraphs (cross-validated on train): a gold
# paragraph rejected loses its subtree, a distractor kept costs a few calls. Sufficiency is
# cut at its best balanced accuracy.
RELEVANCE_RECALL = 0.9
_WORD = re.compile(r"[a-z0-9]+")


@functools.cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _content_words(text: str, stopwords: frozenset[str]) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in stopwords}


def _title_key(title: str) -> str:
    """A title as it is named in running text: lower case, without a "(film)"-style qualifier."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip().lower()


def _named_in(title: str, text: str) -> bool:
    key = _title_key(title)
    return len(key) > 2 and key in text.lower()


def path_features(question: str, passages: Sequence[Passage], vectors: np.ndarray,
                  stopwords: frozenset[str] | None = None) -> np.ndarray:
    """The `FEATURES` of one path. `vectors`: the question's then each paragraph's normalised
    embedding (the encoder the retriever uses), one row each."""
    if not passages:
        raise ValueError("a path needs at least one paragraph")
    stopwords = _stopwords() if stopwords is None else stopwords
    q, paras = vectors[0], vectors[1:]
    mean = paras.mean(axis=0)
    newest, earlier = passages[-1], passages[:-1]
    words = _content_words(question, stopwords) or {""}
    in_path = set().union(*(_content_words(p.as_text(), stopwords) for p in passages))
    before = set().union(set(), *(_content_words(p.as_text(), stopwords) for p in earlier))
    coverage, coverage_before = len(words & in_path) / len(words), len(words & before) / len(words)
    linked = any(_named_in(newest.title, p.text) or _named_in(p.title, newest.text) for p in earlier)
    return np.array([
        float(paras[-1] @ q),
        float(mean @ q / (np.linalg.norm(mean) or 1.0)),
        float(_named_in(newest.title, question)),
        sum(_named_in(p.title, question) for p in passages) / len(passages),
        float(linked),
        coverage,
        coverage - coverage_before,
        float(len(passages)),
    ], dtype=np.float64)


class Logit(BaseModel):
    """One logistic regression on standardised features, with the cut that decides."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN weights would reject everything
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _same_length(self) -> Logit:
        if not len(self.mean) == len(self.scale) == len(self.coef) == len(FEATURES):
            raise ValueError(f"a judge needs {len(FEATURES)} weights ({', '.join(FEATURES)}), "
                             f"got {len(self.mean)}/{len(self.scale)}/{len(self.coef)}")
        if any(s <= 0 for s in self.scale):
            raise ValueError("scales must be positive")
        return self

    def probability(self, x: np.ndarray) -> np.ndarray:
        z = (np.atleast_2d(x) - np.array(self.mean)) / np.array(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.array(self.coef) + self.intercept)))


class PathJudge(BaseModel):
    """The two decisions of a ToR review, as plain numbers (what `compiled.json` stores)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN weights would reject everything
    features: list[str] = Field(default_factory=lambda: list(FEATURES))
    relevance: Logit
    sufficiency: Logit

    @model_validator(mode="after")
    def _known_features(self) -> PathJudge:
        if tuple(self.features) != FEATURES:
            raise ValueError(f"this judge was fitted on features {self.features}, this version computes "
                             f"{list(FEATURES)}: compile it again")
        return self

    def probabilities(self, question: str, passages: Sequence[Passage], embed_fn: EmbedFn) -> tuple[float, float]:
        """(P(the newest paragraph is relevant), P(the path is sufficient)) for one path."""
        vectors = np.asarray(embed_fn([question, *(p.as_text() for p in passages)]), dtype=np.float32)
        x = path_features(question, passages, vectors)
        return float(self.relevance.probability(x)[0]), float(self.sufficiency.probability(x)[0])

    def best_path(self, question: str, passages: Sequence[Passage], embed_fn: EmbedFn,
                  longest: int = 2) -> tuple[float, list[Passage]]:
        """The most sufficient ordered path of up to `longest` of `passages` (a beam state's
        evidence, gathered over several searches), with its P(sufficient): a state holds what
        the question needs when some of its paragraphs, read in some order, do. (0.0, []) for
        no passages. Paths stay as short as the judge's training paths, whatever the state holds."""
        passages = list({p.id: p for p in passages}.values())
        if not passages:
            return 0.0, []
        vectors = np.asarray(embed_fn([question, *(p.as_text() for p in passages)]), dtype=np.float32)
        stopwords = _stopwords()
        paths = [list(order) for n in range(1, min(longest, len(passages)) + 1)
                 for order in itertools.permutations(range(len(passages)), n)]
        x = np.stack([path_features(question, [passages[i] for i in path], vectors[[0, *(i + 1 for i in path)]],
                                    stopwords) for path in paths])
        p = self.sufficiency.probability(x)
        best = int(np.argmax(p))
        return float(p[best]), [passages[i] for i in paths[best]]


def check_path_judge(path_judge: dict | None) -> dict | None:
    """A program's `path_judge` setting as given, once it is known to load as a judge."""
    if path_judge is not None:
        try:
            PathJudge.model_validate(path_judge)
        except ValueError as exc:
            raise ValueError(f"path_judge is not a usable judge: {exc}") from None
    return path_judge


# --- the training paths --------------------------------------------------------------------

def _passage(paragraph: dict) -> Passage:
    from treeqa.annotated import as_passage

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
    from treeqa.annotated import usable

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
    stopwords = _stopwords()
    return np.stack([path_features(q, path, vectors[[row[q], *(row[p.as_text()] for p in path)]], stopwords)
                     for q, path, _, _ in cases])


def _fit_logit(x: np.ndarray, y: np.ndarray, seed: int, min_recall: float | None = None) -> tuple[Logit, float]:
    """A balanced logistic regression and its cross-validated AUC; the threshold is the
    cross-validated cut with the best balanced accuracy, or with `min_recall` the highest
    cut that keeps that share of the true cases."""
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
        from treeqa.annotated import AnnotatedFewShot

        if not hasattr(student, "path_judge"):
            raise ValueError(f"--optimizer path-judge: {type(student).__name__} has no path judge (tor and beam have)")
        program = AnnotatedFewShot(k=self.k, seed=self.seed).compile(student, trainset=trainset)
        judge, figures = fit_path_judge(trainset, program.judge_embed_fn(), self.seed)
        program.path_judge = judge.model_dump()
        program.judge_fit = figures
        return program

