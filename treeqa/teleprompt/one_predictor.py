"""Compile one predictor of a program on fixed examples, one LM call per evaluated example.

What the `reader` and `query` compilers share. The predictor is lifted into a module of its own
(`OnePredictor`) so a DSPy teleprompter compiles it alone. DSPy's teleprompters start from a reset
copy and would drop the demos a preparer gave it (e.g. path-judge's annotated ones), so
`keep_better` scores the predictor as prepared beside the teleprompter's best and keeps it
unless beaten. Every answer is logged in the run folder (`PredictorCalls`), so a compile
stopped anywhere, or moved to a machine without DSPy's cache, replays what it had.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt import BootstrapFewShotWithRandomSearch

from treeqa.lm import prompt_window


class PredictorCalls:
    """One predictor's outputs during a compile, keyed by everything that decides them (instructions,
    demos, call settings, the LM and its settings, the adapter, the inputs) and appended to a JSONL file as
    they come. Unlike DSPy's cache it lives in the run folder, so it travels with the run's
    records. A torn last line is ignored and that call made again."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._outputs: dict[str, dict[str, Any]] = {}
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                    self._outputs[record["key"]] = record["outputs"]
                except (json.JSONDecodeError, RecursionError, KeyError, TypeError):
                    continue

    def __deepcopy__(self, memo):  # every copy a teleprompter makes of the module shares the log
        return self

    @staticmethod
    def key(predictor: dspy.Predict, inputs: dict[str, Any]) -> str | None:
        lm = predictor.lm or dspy.settings.lm
        what = {"instructions": predictor.signature.instructions, "fields": list(predictor.signature.fields),
                "demos": [dict(demo) for demo in predictor.demos], "config": predictor.config,
                "lm": [getattr(lm, "model", None), getattr(lm, "kwargs", None)],
                "adapter": getattr(dspy.settings.adapter, "formats_as", type(dspy.settings.adapter).__name__),
                "inputs": inputs}
        try:
            text = json.dumps(what, sort_keys=True, ensure_ascii=False)
        except TypeError:
            return None  # inputs or demos that are not plain data: not logged, always called
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        return self._outputs.get(key)

    def put(self, key: str, outputs: dict[str, Any]) -> None:
        try:
            line = json.dumps({"key": key, "outputs": outputs}, ensure_ascii=False)
        except TypeError:
            return
        with self._lock:
            self._outputs[key] = outputs
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as sink:
                    sink.write(line + "\n")


class OnePredictor(dspy.Module):
    """A module of one predictor, so a teleprompter can compile it alone; with `calls`, answers
    already logged are replayed (and traced, so bootstrapping still sees them)."""

    def __init__(self, predictor: dspy.Predict, calls: PredictorCalls | None = None):
        super().__init__()
        self.predictor = predictor
        self.calls = calls

    def forward(self, **inputs) -> dspy.Prediction:
        key = self.calls.key(self.predictor, inputs) if self.calls is not None else None
        outputs = self.calls.get(key) if key is not None else None
        if outputs is None:
            prediction = self.predictor(**inputs)
            if key is not None:
                self.calls.put(key, {name: prediction[name] for name in self.predictor.signature.output_fields})
            return prediction
        prediction = dspy.Prediction(**outputs)
        if dspy.settings.trace is not None:
            dspy.settings.trace.append((self.predictor, inputs, prediction))
        return prediction


def score(module: dspy.Module, examples: Sequence[dspy.Example], metric, threads: int = 1) -> float:
    """The metric's mean (0-100) of `module` on the examples, one call an example."""
    evaluate = dspy.Evaluate(devset=list(examples), metric=metric, num_threads=threads, display_progress=True,
                             max_errors=10_000)
    return float(evaluate(module).score)


REPLY_TOKENS = 128  # room left in the window for the reply itself


def demo_pool(predictor: dspy.Predict, examples: Sequence[dspy.Example], max_demos: int,
              lm: dspy.BaseLM | None = None) -> list[dspy.Example]:
    """The examples that may become demos: those of which `max_demos` beside the longest
    example's own prompt still fit the model's context window.

    A prompt over the window fails the call, so a candidate given two long reads as demos (two
    MuSiQue reads fill most of the embedded model's 4,096 tokens) was scored on failures, not on
    its demos. Counted with the model's own tokenizer where the LM says its window (the embedded
    model); every example where it does not (an endpoint)."""
    window = prompt_window(lm or predictor.lm or dspy.settings.lm)
    examples = list(examples)
    if window is None or max_demos == 0 or not examples:
        return examples
    limit, count = window
    adapter, signature = dspy.settings.adapter or dspy.ChatAdapter(), predictor.signature
    bare = [count(adapter.format(signature, [], example.inputs().toDict())) for example in examples]
    shortest = examples[bare.index(min(bare))].inputs().toDict()
    room = (limit - max(bare) - REPLY_TOKENS) // max_demos
    return [example for example in examples
            if count(adapter.format(signature, [as_demo(example, signature)], shortest)) - min(bare) <= room]


def as_demo(example: dspy.Example, signature) -> dict[str, Any]:
    """The example as a bootstrapped demo would show it: its inputs and the gold as every output."""
    gold = example.get("answers") or [""]
    return {**example.inputs().toDict(), **{name: example.get(name, str(gold[0])) for name in signature.output_fields}}


def random_search(module: OnePredictor, examples: Sequence[dspy.Example], metric, max_demos: int,
                  candidates: int, threads: int = 1, pool: Sequence[dspy.Example] | None = None) -> OnePredictor:
    """DSPy's BootstrapFewShotWithRandomSearch with demos bootstrapped from the examples of
    `pool` (default: all) the predictor got right only (no labeled demos), every candidate
    scored on all the examples."""
    teleprompter = BootstrapFewShotWithRandomSearch(
        metric=metric, max_bootstrapped_demos=max_demos, max_labeled_demos=0, num_candidate_programs=candidates,
        num_threads=threads, max_errors=10_000)
    return teleprompter.compile(module, trainset=list(examples if pool is None else pool), valset=list(examples))


def reported_score(compiled: dspy.Module) -> float | None:
    """The score a teleprompter measured for the program it returned, when it kept one."""
    if getattr(compiled, "score", None) is not None:  # MIPROv2
        return float(compiled.score)
    candidates = getattr(compiled, "candidate_programs", None)  # random search: best first
    return float(candidates[0]["score"]) if candidates else None


def keep_better(predictor: dspy.Predict, examples: list[dspy.Example], calls: PredictorCalls,
                score_fn: Callable[[OnePredictor, list[dspy.Example]], float],
                compile_fn: Callable[[OnePredictor, list[dspy.Example]], OnePredictor]) -> tuple[float, float, str]:
    """Score `predictor` as prepared, compile a copy, and put the compiled demos and instructions
    on `predictor` only if they score higher (a tie keeps what the preparer made).
    Returns (prepared score, compiled score, "prepared" or "compiled")."""
    prepared = score_fn(OnePredictor(predictor.deepcopy(), calls), examples)
    compiled = compile_fn(OnePredictor(predictor.deepcopy(), calls), examples)
    compiled_score = reported_score(compiled)
    if compiled_score is None:
        compiled_score = score_fn(compiled, examples)
    kept = "compiled" if compiled_score > prepared else "prepared"
    if kept == "compiled":
        predictor.demos = compiled.predictor.demos
        predictor.signature = compiled.predictor.signature
    return prepared, compiled_score, kept
