"""`judge`: the annotated demos, then ToR's/CoR's relevance threshold on the review's P(relevant)."""

from treeqa.judge import DISTRACTORS_PER_QUESTION, RelevanceJudge
from treeqa.teleprompt.base import Compiler, register

# one review per annotated paragraph: the gold ones and the distractors of each question
register(Compiler("judge", lambda c: (RelevanceJudge(k=c.spec.annotated_demos, seed=c.spec.seed), {}),
                  lambda per_q, n, t: n * (2 + DISTRACTORS_PER_QUESTION), preparer=True, needs_annotations=True,
                  from_annotations=True,
                  fits=lambda cls: "relevance_threshold" in cls.settings_model().model_fields,
                  unfit="has no relevance threshold for a review to be judged by"))
