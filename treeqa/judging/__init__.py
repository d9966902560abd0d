"""What decides at question time without the LM: the path judge's features and fitted model,
and the model's own verdict probabilities. Fitting lives in `treeqa.teleprompt`."""

from treeqa.judging.path_judge import FEATURES, Logit, PathJudge, check_path_judge, path_features
from treeqa.judging.verdicts import LOGPROBS, verdict_probability

__all__ = ["FEATURES", "LOGPROBS", "Logit", "PathJudge", "check_path_judge", "path_features", "verdict_probability"]
