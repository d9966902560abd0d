"""Does the embedded engine's next-token logit depend on how a prompt was split into batches?

    python benchmarks/prefix_split.py

A prompt reaches llama.cpp whole, or as a suffix after a prefix reused from the KV cache (the
previous call's, or a saved state), so the same prompt is computed in different batches
depending on what the engine answered before. This evaluates one 1,000-token prompt four ways
with the engine's own loader (n_batch 512) and prints the largest difference of the last
position's logits from the whole prompt's. A difference means a program's greedy answers can
depend on its call history: two runs that differ in one predictor's calls (an adapter on the
reader) can search differently. No LM answer is generated; seconds are not measured.
"""

from __future__ import annotations

import numpy as np


def last_logits(llama, tokens: list[int], splits: list[int]) -> np.ndarray:
    llama.reset()
    start = 0
    for end in [*splits, len(tokens)]:
        llama.eval(tokens[start:end])
        start = end
    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64).copy()


def main() -> None:
    from pathlib import Path

    from treeqa.lm import _weights
    from treeqa.lm._engine import LlamaEngine

    llama = LlamaEngine._load(_weights.model_path(), 2, 4096, 0)
    text = (Path(__file__).parent.parent / "docs" / "finetune.md").read_text()
    tokens = llama.tokenize(text.encode())[:1000]
    whole = last_logits(llama, tokens, [])
    print(f"prompt: {len(tokens)} tokens of docs/finetune.md; n_batch 512")
    print("| computed as | max abs logit difference from the whole prompt | same argmax |")
    print("|---|---|---|")
    for label, splits in [("the whole prompt again", []), ("700 reused, then 300", [700]),
                          ("300 reused, then 350, then 350", [300, 650]), ("650 reused, then 350", [650])]:
        other = last_logits(llama, tokens, splits)
        print(f"| {label} | {np.abs(whole - other).max():.3f} | {whole.argmax() == other.argmax()} |")


if __name__ == "__main__":
    main()
