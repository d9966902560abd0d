"""How many recorded reads may become reader demos in the embedded model's window, and what the
longest prompt of a candidate would take without that limit.

`python benchmarks/demo_pool.py RUN_DIR...` reads each composed compile's `recorded-reads.jsonl`
and counts, with the embedded model's tokenizer (vocabulary only, no weights computed) and the
JSON adapter the compile uses, the reads `one_predictor.demo_pool` keeps for `--max-demos` demos,
and how many of the reads would overflow the window given the two longest reads as demos (the
worst a candidate drawn from all the reads could be given). No LM call.
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import typer

from treeqa.lm import LlamaEngine, model_path
from treeqa.settings import get_settings
from treeqa.signatures.fusion import FUSION_INPUT, FUSION_SIGNATURES
from treeqa.teleprompt.one_predictor import as_demo, demo_pool


class _Vocabulary:
    """The model's tokenizer with the window the engine is run with."""

    def __init__(self, window: int):
        import llama_cpp

        self._llama = llama_cpp.Llama(model_path=str(model_path()), vocab_only=True, verbose=False)
        self.window = window

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = True) -> list[int]:
        return self._llama.tokenize(text, add_bos=add_bos, special=special)

    def n_ctx(self) -> int:
        return self.window


def main(runs: list[Path], max_demos: int = 2) -> None:
    window = get_settings().context_size
    engine = LlamaEngine(llama=_Vocabulary(window))
    lm = dspy.LM("local/vocabulary", engine=engine, cache=False)
    adapter = dspy.JSONAdapter()
    print(f"window {window} tokens, {max_demos} demos")
    print("| run | reads | bare prompt tokens (min / median / max) | demo pool "
          "| reads over the window with the two longest as demos |")
    print("|---|---|---|---|---|")
    for run in runs:
        reads = [json.loads(line) for line in (run / "recorded-reads.jsonl").read_text().splitlines() if line.strip()]
        examples = [dspy.Example(**r["inputs"], answers=r["answers"]).with_inputs(*r["inputs"])
                    for r in reads if r.get("inputs")]
        fusion = next(f for f, field in FUSION_INPUT.items() if field in examples[0])  # the reader's signature
        predictor = dspy.Predict(FUSION_SIGNATURES[fusion])
        with dspy.context(lm=lm, adapter=adapter):
            pool = demo_pool(predictor, examples, max_demos)
            bare = sorted(engine.count_prompt_tokens(adapter.format(predictor.signature, [], ex.inputs()))
                          for ex in examples)
            longest = sorted(examples, key=lambda ex: len(json.dumps(ex.inputs().toDict())))[-max_demos:]
            demos = [as_demo(ex, predictor.signature) for ex in longest]
            over = sum(engine.count_prompt_tokens(adapter.format(predictor.signature, demos, ex.inputs())) > window
                       for ex in examples)
        print(f"| {run} | {len(examples)} | {bare[0]} / {bare[len(bare) // 2]} / {bare[-1]} | {len(pool)} | {over} |")


if __name__ == "__main__":
    typer.run(main)
