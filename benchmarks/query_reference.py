"""What the query compile is measured against: the same annotated train paths (`treeqa.teleprompt.query_writer`)
searched with the question itself instead of a written paragraph, no LM call.

    python benchmarks/query_reference.py [N_TRAIN]
"""
import sys

from treeqa.data import load_examples
from treeqa.programs import TreeOfReviews
from treeqa.programs.review_run import ReviewRun
from treeqa.retrievers import get_retriever
from treeqa.teleprompt.query_writer import query_examples

program = TreeOfReviews(retriever=get_retriever("hotpotqa", "dense"))
examples = query_examples(program, load_examples("hotpotqa", "train", n=int(sys.argv[1]) if len(sys.argv) > 1 else 20))
hits = 0
for ex in examples:
    found = program.search_below(ReviewRun(ex.question), ex.question, ex.path, program.expansion_width, "q")
    hits += any(p.id in ex.missing_ids for p in found)
print(f"question as the query: {hits}/{len(examples)} paths = {100 * hits / len(examples):.1f}%")
