"""`settings`: the program's settings chosen on train by EM among draws from the space it declares."""

from treeqa.settings_search import SettingsSearch
from treeqa.teleprompt.base import Compiler, register
from treeqa.teleprompt.metrics import em_metric

register(Compiler("settings",
                  lambda c: (SettingsSearch(em_metric, candidates=c.tuning["candidates"], seed=c.spec.seed,
                                            demos=c.spec.annotated_demos, threads=c.spec.threads), {}),
                  lambda per_q, n, t: n * (t["candidates"] + 1) * per_q, preparer=True,
                  fits=lambda cls: bool(cls.settings_space()), unfit="has no settings to search"))
