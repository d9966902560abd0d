"""The reader's training as a library: the reads it learns from (rta's, RAFT-style: `reads`; ToR's
own: `tor_reads`; gold reads for `--optimizer finetune`: `gold_reads`), the reasons the model finds
for them (`reasons`), the chats a training takes (`chats`), validation scoring (`scores`), the whole
road from questions to an adapter (`reader`), the released reader (`released`), and putting an
adapter on a compiled program (`attach`). The weights themselves are trained by `treeqa.lm`
(`lora`, `provider`); `cli/train.py` only parses options over this package.
"""
