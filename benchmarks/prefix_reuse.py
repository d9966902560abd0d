"""Does the embedded engine compute more prompt tokens than prefix reuse makes necessary?

    python benchmarks/prefix_reuse.py [--questions 3] [--out benchmarks/prefix_reuse.md]

Runs zero-shot ToR and beam on the first seeded HotpotQA *train* questions with the default
engine (KV reuse of the previous call plus the RAM cache of prefix states) and records, per
call, the prompt's tokens, the tokens llama.cpp computed, and the tokens it would have had to
compute at best: the prompt minus its longest common prefix with any earlier call's prompt
and reply. Run it alone.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def measure(questions: int) -> list[dict]:
    from treeqa.data import load_examples
    from treeqa.evaluation.loop import run_example
    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs import build_program
    from treeqa.retrievers import get_retriever

    lm = get_lm("local", cache=False)
    engine = lm._engine_spec
    llama, generate = engine.llama, engine.llama.generate
    sequences: list[tuple[list[int], list[int]]] = []  # (prompt, prompt + reply) per call

    def recording_generate(tokens, *args, **kwargs):
        prompt, reply = list(tokens), []
        try:
            for token in generate(tokens, *args, **kwargs):
                reply.append(token)
                yield token
        finally:
            sequences.append((prompt, prompt + reply))

    llama.generate = recording_generate
    retriever = get_retriever("hotpotqa")
    for name in ("tor", "beam"):
        program = build_program(name, retriever)
        for example in load_examples("hotpotqa", "train", n=questions, seed=0):
            run_example(program, example, lm, keep_tree=False, adapter=adapter_for(lm))
    rows = []
    for i, ((prompt, _), call) in enumerate(zip(sequences, engine.stats.per_call, strict=True)):
        reuse = max((common_prefix(prompt, seen) for _, seen in sequences[:i]), default=0)
        rows.append({"sent": len(prompt), "computed": call["computed"], "necessary": max(1, len(prompt) - reuse)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("prefix_reuse.md"))
    args = parser.parse_args()
    rows = measure(args.questions)
    sent, computed, necessary = (sum(r[k] for r in rows) for k in ("sent", "computed", "necessary"))
    over = sum(1 for r in rows if r["computed"] > r["necessary"] + 1)
    text = "\n".join([
        "# Prompt tokens computed against what prefix reuse makes necessary", "",
        f"Command: `python benchmarks/prefix_reuse.py --questions {args.questions}` (run alone, embedded model, "
        f"{time.strftime('%Y-%m-%d')}): zero-shot ToR and beam on the first {args.questions} seeded HotpotQA train "
        "questions, default engine.", "",
        "| calls | prompt tokens sent | computed | necessary at best | calls computing 2+ more than necessary |",
        "|---|---|---|---|---|",
        f"| {len(rows)} | {sent} | {computed} | {necessary} | {over} |", "",
        "Necessary at best: each prompt minus its longest common prefix with any earlier call's prompt and reply "
        "(at least one token, which llama.cpp evaluates again to get fresh logits).", ""])
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
