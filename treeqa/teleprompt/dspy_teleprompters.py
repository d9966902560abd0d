"""DSPy's own teleprompters against EM, sized for a small CPU budget.

Multi-step programs get bootstrapped demos only: a raw example has no fields for the inner
predictors (review, score, ...), so labeled demos would be empty shells.
"""

from __future__ import annotations

from dspy.teleprompt import COPRO, GEPA, SIMBA, BootstrapFewShot, BootstrapFewShotWithRandomSearch, MIPROv2

from treeqa.teleprompt.base import CompileContext, Compiler, register
from treeqa.teleprompt.metrics import em_feedback_metric, em_metric


def _common(c: CompileContext) -> dict:
    return dict(metric=em_metric, max_bootstrapped_demos=c.spec.max_demos, max_labeled_demos=0)


register(Compiler(
    "bootstrap", lambda c: (BootstrapFewShot(**_common(c), teacher_settings=c.teacher, max_errors=10_000), {}),
    lambda per_q, n, t: n * per_q))
register(Compiler(
    "random-search",
    lambda c: (BootstrapFewShotWithRandomSearch(**_common(c), teacher_settings=c.teacher,
                                                num_candidate_programs=c.tuning["candidates"],
                                                num_threads=c.spec.threads, max_errors=10_000), {}),
    lambda per_q, n, t: n * (t["candidates"] + 4) * per_q))
register(Compiler(
    "mipro",
    lambda c: (MIPROv2(**_common(c), prompt_model=c.proposer, task_model=c.task_lm, teacher_settings=c.teacher,
                       auto=None, num_candidates=c.tuning["candidates"], num_threads=c.spec.threads,
                       max_errors=10_000, seed=c.spec.seed, verbose=False),
               {"num_trials": c.tuning["trials"], "minibatch": False}),
    lambda per_q, n, t: (n * t["candidates"] + t["trials"] * n) * per_q))
register(Compiler(
    "copro",
    lambda c: (COPRO(prompt_model=c.proposer, metric=em_metric, breadth=c.tuning["breadth"], depth=c.tuning["depth"]),
               {"eval_kwargs": {"num_threads": c.spec.threads, "display_progress": True}}),
    lambda per_q, n, t: t["breadth"] * t["depth"] * n * 4 * per_q))
register(Compiler(
    "simba",
    lambda c: (SIMBA(metric=em_metric, bsize=c.tuning["bsize"], num_candidates=c.tuning["candidates"],
                     max_steps=c.tuning["steps"], max_demos=c.spec.max_demos, prompt_model=c.proposer,
                     teacher_settings=c.teacher, num_threads=c.spec.threads), {"seed": c.spec.seed}),
    lambda per_q, n, t: t["steps"] * min(t["bsize"], n) * (t["candidates"] + 1) * per_q))
register(Compiler(
    "gepa",
    lambda c: (GEPA(metric=em_feedback_metric, max_metric_calls=c.tuning["metric_calls"], reflection_lm=c.proposer,
                    num_threads=c.spec.threads, seed=c.spec.seed, track_stats=False), {}),
    lambda per_q, n, t: t["metric_calls"] * per_q, holds_out=True))
