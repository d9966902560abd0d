"""What a program a compiled path judge can decide for needs (ToR and CoR's review base, the
beam search): the judge setting, the encoder it embeds with, and the judge itself, written once."""

from __future__ import annotations

from treeqa.judging.path_judge import PathJudge, check_path_judge
from treeqa.programs.common import SharedRef
from treeqa.programs.contract import QAProgram
from treeqa.retrievers.encoder import EmbedFn, default_embed


class JudgedProgram(QAProgram):
    """Base of the programs with a `path_judge` setting (a compiled judge's plain numbers, or
    None) and an `embed_fn` (texts -> normalised vectors; None: the dense retriever's encoder)."""

    def _keep_judge(self, path_judge: dict | None, embed_fn: EmbedFn | None) -> None:
        """Keep the judge setting, checked, and the encoder, shared (never copied) when
        optimizers deep-copy the program."""
        self.path_judge = check_path_judge(path_judge)
        self._embed_fn = SharedRef(embed_fn)

    @property
    def embed_fn(self) -> EmbedFn | None:
        return self._embed_fn.value

    def judge_embed_fn(self) -> EmbedFn:
        """The encoder a path judge embeds the question and paragraphs with (the retriever's own)."""
        return self.embed_fn or default_embed

    def _judge(self) -> PathJudge | None:
        return None if self.path_judge is None else PathJudge.model_validate(self.path_judge)
