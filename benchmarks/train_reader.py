"""Train a LoRA reader for rta on gold reads, resumably, and print what the training cost.

The training questions are train splits and the reference dev questions that were examined
while designing (never the unexamined samples a report claims on): each becomes a gold read,
the question with its gold paragraphs among rta's retrieved passages, trained to the gold
answer in rta's exact prompt. The chats are written once to OUT/train-data.jsonl (a rerun
reads them back), then `train_adapter` trains from OUT/checkpoint.pt where one exists.

    python benchmarks/train_reader.py --out benchmarks/runs/lora-reader-rta \
        --take hotpotqa:train:100 --take hotpotqa:dev:100 [--recipe top_layers=4] [--budget-s 3600]

`--take DATASET:SPLIT:N[:SKIP]` takes N questions of the seeded order after SKIP (repeatable).
`--data-only` builds the chats and stops (the retriever embeds queries: run it before, not
beside, a training). `--compiled DATASET` (repeatable) writes OUT/compiled-DATASET.json, rta
answering through the adapter, for `treeqa evaluate --compiled`; with `--from-checkpoint` the
adapter is what OUT/checkpoint.pt holds (a training stopped early or still running: no
training then). Prints the training report as YAML.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build_chats(takes: list[str], k: int) -> tuple[list[dict], list[dict]]:
    from treeqa.data import load_examples
    from treeqa.lm import TrainableJSONAdapter
    from treeqa.programs import build_program
    from treeqa.retrievers import get_retriever
    from treeqa.train.gold_reads import gold_reads

    chats, sources = [], []
    for take in takes:
        dataset, split, n, *skip = take.split(":")
        examples = load_examples(dataset, split, n=int(n), skip=int(skip[0]) if skip else 0)
        program = build_program("rta", get_retriever(dataset), k=k)
        made, skipped = gold_reads(program, examples, TrainableJSONAdapter(), seed=0)
        chats += made
        sources.append({"take": take, "questions": len(examples), "chats": len(made), "skipped": skipped})
        print(f"{take}: {len(made)} gold reads ({skipped} without gold paragraphs in the corpus)", file=sys.stderr)
    return chats, sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--take", action="append", default=[], help="DATASET:SPLIT:N[:SKIP], repeatable")
    parser.add_argument("--k", type=int, default=5, help="passages per read, as rta's k")
    parser.add_argument("--recipe", action="append", default=[], help="LoraRecipe field=value, repeatable")
    parser.add_argument("--budget-s", type=float, default=None)
    parser.add_argument("--data-only", action="store_true")
    parser.add_argument("--compiled", action="append", default=[], help="write OUT/compiled-DATASET.json")
    parser.add_argument("--balance-yes-no", action="store_true",
                        help="train on as many gold 'yes' as 'no' reads (surplus left out, seeded)")
    parser.add_argument("--from-checkpoint", action="store_true",
                        help="export the adapter from OUT/checkpoint.pt instead of training")
    args = parser.parse_args()

    from treeqa.lm.lora import LoraRecipe
    from treeqa.lm.provider import read_chats, train_adapter

    args.out.mkdir(parents=True, exist_ok=True)
    data = args.out / "train-data.jsonl"
    if data.is_file():
        chats = read_chats(data)
    else:
        if not args.take:
            parser.error("--take is required when OUT holds no train-data.jsonl yet")
        chats, sources = build_chats(args.take, args.k)
        (args.out / "sources.json").write_text(json.dumps(sources, indent=2))
        data.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chats), encoding="utf-8")
    if args.balance_yes_no:
        from treeqa.train.gold_reads import balance_yes_no

        chats, dropped = balance_yes_no(chats)
        print(f"--balance-yes-no: {dropped} reads of the more frequent yes/no answer left out, {len(chats)} kept",
              file=sys.stderr)
    if args.data_only:
        print(f"{len(chats)} chats in {data}")
        return
    fields = {}
    for item in args.recipe:
        key, _, value = item.partition("=")
        fields[key] = type(getattr(LoraRecipe(), key))(value) if key != "targets" else tuple(value.split(","))
    recipe = LoraRecipe(**fields)
    if args.from_checkpoint:
        from treeqa.lm.adapter import adapter_from_checkpoint

        adapter, steps = adapter_from_checkpoint(args.out / "checkpoint.pt", args.out / "adapter.gguf",
                                                 alpha=recipe.alpha)
        print(f"adapter {adapter} from the checkpoint: {steps} of {len(chats) * recipe.epochs} examples trained")
    else:
        adapter, report = train_adapter(chats, args.out, recipe, budget_s=args.budget_s)
        print(yaml.safe_dump({"adapter": str(adapter), "recipe": recipe.to_dict(), "report": report.to_dict()},
                             sort_keys=False))
    for dataset in args.compiled:
        print(f"wrote {write_compiled(adapter, args.out / f'compiled-{dataset}.json', dataset, args.k)}")


def write_compiled(adapter: Path, path: Path, dataset: str, k: int) -> Path:
    """rta (k passages) whose reader answers through `adapter`, as a compiled program."""
    from treeqa.programs import build_program
    from treeqa.programs.compiled import attach_adapter, save_compiled
    from treeqa.retrievers import get_retriever

    program = build_program("rta", get_retriever(dataset), k=k)
    attach_adapter(program, adapter, ["answer"])
    return save_compiled(program, path, name="rta", dataset=dataset, retriever="dense",
                         extra={"compiler": {"optimizer": "finetune (gold reads, benchmarks/train_reader.py)"}})


if __name__ == "__main__":
    main()
