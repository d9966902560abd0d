"""The path judge at question time: a path's features and the fitted model that decides on them.

On the 1.5B model the review's written verdicts are biased and its probabilities barely rank
paths; what decides relevance and sufficiency in multi-hop questions is largely visible without
a language model: a bridge paragraph's title is named in the paragraph before it, a compared
entity's title is named in the question, and a full path covers more of the question's words
than half of one. `PathJudge` scores a path (the question and the paragraphs from the root to
the node) with two logistic regressions over such features: P(the newest paragraph is
relevant) and P(the path holds every supporting paragraph). Its numbers are plain, saved in
`compiled.json` as a program's `path_judge` setting; fitting them is a compiler's work
(`treeqa/teleprompt/path_judge_fit.py`), never imported at question time.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from treeqa.data.passage import Passage
from treeqa.retrievers.encoder import EmbedFn
from treeqa.retrievers.links import title_key

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
_WORD = re.compile(r"[a-z0-9]+")


@functools.cache
def stopword_set() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN  # bm25s loads where it is used, not by every command

    return frozenset(STOPWORDS_EN)


def _content_words(text: str, stopwords: frozenset[str]) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in stopwords}


def _named_in(title: str, text: str) -> bool:
    key = title_key(title)
    return len(key) > 2 and key in text.lower()


def path_features(question: str, passages: Sequence[Passage], vectors: np.ndarray,
                  stopwords: frozenset[str] | None = None) -> np.ndarray:
    """The `FEATURES` of one path. `vectors`: the question's then each paragraph's normalised
    embedding (the encoder the retriever uses), one row each."""
    if not passages:
        raise ValueError("a path needs at least one paragraph")
    stopwords = stopword_set() if stopwords is None else stopwords
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
        stopwords = stopword_set()
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
