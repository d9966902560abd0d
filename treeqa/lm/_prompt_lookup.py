"""Speculative decoding drafted from the prompt, without llama-cpp-python's logits table.

Much of what the programs generate is copied from their prompts (analyses quote paragraphs,
queries reuse names, answers are spans), and on a CPU the model computes a batch of prompt
tokens about 3.6 times faster than it generates them one by one. llama-cpp-python's
`generate` can take a draft model (`LlamaPromptLookupDecoding`: the tokens that followed the
last n-gram's earlier occurrence in the prompt and output): it evaluates the next token and
the drafted ones in one batch, samples at each position and keeps the drafts up to the first
disagreement. Sampling stays the same (the greedy grammar sampler checks every kept token
against the grammar), so the output is token for token what plain greedy decoding gives.

But the library then insists on `logits_all`, which copies n_ctx x vocabulary floats (2.5 GB
for Qwen2.5 at 4096 tokens) and every batch's logits into them. This module sets the draft
model on a plain `Llama` and replaces its `eval`: the prompt batch asks llama.cpp for the
last position's logits only, a verification batch for every position, and nothing is copied;
the sampler reads the logits it needs straight from the context.
"""

from __future__ import annotations

import numpy as np


class RecentNgramDraft:
    """Drafts the tokens that followed the latest earlier occurrence of the text's last n-gram.

    llama-cpp-python's `LlamaPromptLookupDecoding` takes the *first* occurrence and falls back
    to a single token, so nearly every step drafts something, mostly from the system prompt and
    mostly wrong. Here only an n-gram of at least `min_ngram` tokens drafts (longest first), from
    its most recent occurrence: the paragraph or the reply being copied. No match: no draft, and
    the step costs what a plain step costs.
    """

    def __init__(self, draft_tokens: int, min_ngram: int = 2, max_ngram: int = 4):
        self.draft_tokens, self.min_ngram, self.max_ngram = draft_tokens, min_ngram, max_ngram

    def __call__(self, input_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(input_ids)
        for n in range(min(self.max_ngram, len(ids) - 1), self.min_ngram - 1, -1):
            windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)  # not the tail itself
            hits = np.flatnonzero((windows == ids[-n:]).all(axis=1))
            if len(hits):
                start = int(hits[-1]) + n
                return ids[start:start + self.draft_tokens].astype(np.intc)
        return np.array([], dtype=np.intc)


def install(llama, decoding, draft_tokens: int) -> None:
    """Give `llama` a prompt-lookup draft of up to `draft_tokens` tokens and the lean `eval`.

    `decoding` (from `_greedy_grammar.install`) marks when a generation starts (its first
    `eval` is the prompt) and collects the counts: prompt tokens evaluated, verification
    batches and drafted tokens.
    """
    if draft_tokens < 1:
        raise ValueError(f"draft_tokens must be positive, got {draft_tokens}")
    llama.draft_model = RecentNgramDraft(draft_tokens)

    def lean_eval(tokens) -> None:
        """`Llama.eval`, asking for every position's logits only in a verification batch."""
        verifying = not decoding.prompt_pending
        decoding.prompt_pending = False
        llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)
        for start in range(0, len(tokens), llama.n_batch):
            batch = tokens[start:start + llama.n_batch]
            n_past = llama.n_tokens
            llama._batch.set_batch(batch=batch, n_past=n_past, logits_all=verifying)
            llama._ctx.decode(llama._batch)
            llama.input_ids[n_past:n_past + len(batch)] = batch
            llama.n_tokens += len(batch)
            llama._requires_eval = False
        if verifying:
            decoding.verify_batches += 1
            decoding.drafted += len(tokens) - 1
        else:
            decoding.prompt_evaluated += len(tokens)

    llama.eval = lean_eval
