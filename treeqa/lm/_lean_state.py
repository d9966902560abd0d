"""Prefix states for llama.cpp's RAM cache without the logits table llama-cpp-python copies along.

`Llama.save_state` copies the whole `scores` table with every state: n_batch x vocabulary
floats (512 x 151,936 x 4 B = 311 MB for Qwen2.5), though nothing reads it unless
`logits_all` is on. `LlamaRAMCache` does not count it against its capacity, so a run kept
gigabytes of copies and spent a second or more per call moving them. These replacements
store and restore only the KV state and the token ids, which is all that resuming a
prefix needs.
"""

from __future__ import annotations

import ctypes

import numpy as np

_NO_SCORES = np.zeros((0, 0), dtype=np.single)


def install(llama) -> None:
    """Replace `llama.save_state` / `load_state` with the lean versions (logits_all must be off)."""
    if getattr(llama, "_logits_all", False):
        return  # the scores are real then: keep llama-cpp-python's own
    # llama.cpp's bindings are heavy: loaded once a model is, not by treeqa.lm
    import llama_cpp
    from llama_cpp.llama import LlamaState

    def save_state() -> LlamaState:
        ctx = llama._ctx.ctx
        size = llama_cpp.llama_state_get_size(ctx)
        data = (ctypes.c_uint8 * int(size))()
        written = int(llama_cpp.llama_state_get_data(ctx, data, size))
        if written > int(size):
            raise RuntimeError("llama.cpp wrote more state than it announced")
        return LlamaState(input_ids=llama.input_ids[:llama.n_tokens].copy(), scores=_NO_SCORES,
                          n_tokens=llama.n_tokens, llama_state=data, llama_state_size=written, seed=llama._seed)

    def load_state(state: LlamaState) -> None:
        if llama_cpp.llama_state_set_data(llama._ctx.ctx, state.llama_state, state.llama_state_size) \
                != state.llama_state_size:
            raise RuntimeError("llama.cpp could not restore a saved prefix state")
        llama.input_ids[:state.n_tokens] = state.input_ids[:state.n_tokens]
        llama.n_tokens = state.n_tokens
        llama._requires_eval = True
        llama._seed = state.seed

    llama.save_state = save_state
    llama.load_state = load_state
