"""`annotated`: labeled demos for the predictors a program declares (`annotation_demos`) from the
training annotations, no LM call."""

from treeqa.annotated import AnnotatedFewShot
from treeqa.teleprompt.base import Compiler, register

register(Compiler("annotated", lambda c: (AnnotatedFewShot(k=c.spec.annotated_demos, seed=c.spec.seed), {}),
                  lambda per_q, n, t: 0, preparer=True, needs_annotations=True, from_annotations=True,
                  fits=lambda cls: bool(cls.annotation_demos),
                  unfit="declares no predictors the annotations can teach (annotation_demos)"))
