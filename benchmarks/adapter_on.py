"""A compiled program with a LoRA adapter added to some of its predictors, saved as a new
compiled file (the adapter copied beside it and recorded with its hash, as `optimize` does):
for measuring an adapter trained on one program's reads inside another program.

    python benchmarks/adapter_on.py COMPILED ADAPTER OUT [--predictor NAME ...]

e.g. the best compiled ToR of 2Wiki with the rta-trained reader adapter on its fusion reader:

    python benchmarks/adapter_on.py \
        benchmarks/runs/2wikimultihopqa-dev-unexamined-skip50-n100/tor-path-judge-read-3-reader/compiled.json \
        benchmarks/runs/lora-reader-rta-balanced/adapter-f451c1c679e9.gguf \
        benchmarks/runs/lora-reader-rta-balanced/compiled-tor-2wikimultihopqa.json --predictor fuse

The predictors default to the program's own reader (`QAProgram.reader`). Nothing is trained
and no LM is called.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compiled", type=Path)
    parser.add_argument("adapter", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--predictor", action="append", default=[], help="a predictor to answer through it")
    args = parser.parse_args()

    from treeqa.programs.compiled import attach_adapter, load_program, read_recipe, save_compiled

    recipe, _ = read_recipe(args.compiled)
    program = load_program(args.compiled)
    predictors = args.predictor or [type(program).reader]
    attach_adapter(program, args.adapter, predictors)
    extra = {key: recipe[key] for key in ("compile", "corpus") if key in recipe}
    extra["adapter_added"] = {"from": str(args.compiled), "adapter": args.adapter.name, "predictors": predictors}
    path = save_compiled(program, args.out, name=recipe["program"], dataset=recipe["dataset"],
                         retriever=recipe.get("retriever", "dense"), preset=recipe.get("preset"),
                         params=recipe.get("params") or {}, extra=extra)
    print(f"wrote {path}: {recipe['program']} with {args.adapter.name} on {', '.join(predictors)}")


if __name__ == "__main__":
    main()
