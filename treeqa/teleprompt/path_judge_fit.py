"""`path-judge`: the annotated demos, then a judge of relevance and sufficiency fitted on the
annotations with the encoder (no LM call), for programs with a `path_judge` setting."""

from treeqa.path_judge import PathJudgeFit
from treeqa.teleprompt.base import Compiler, register

register(Compiler("path-judge", lambda c: (PathJudgeFit(k=c.spec.annotated_demos, seed=c.spec.seed), {}),
                  lambda per_q, n, t: 0, preparer=True, needs_annotations=True,
                  fits=lambda cls: "path_judge" in cls.settings_model().model_fields, unfit="has no path judge"))
