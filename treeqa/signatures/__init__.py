"""Typed DSPy signatures, one concern per module: ask, answer, score and evidence (ALLIES),
review and fusion (Tree of Reviews); `budget` caps each predictor at its signature's
`max_tokens`, `formatting` shows passages and history to the LM one way everywhere."""
