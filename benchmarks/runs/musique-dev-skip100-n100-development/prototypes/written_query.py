"""Prototype: the first K expansions of a question write their query with the LM (NextSearchQuery on
the question and the path's paragraphs); that query's hits come before the title links."""
import sys, time
ROOT_DIR = __import__('pathlib').Path(__file__).resolve().parents[4]; sys.path.insert(0, str(ROOT_DIR)); sys.path.insert(0, str(ROOT_DIR / 'benchmarks'))
import dspy, treeqa
import treeqa.programs.review_base as rb
from treeqa.signatures.hop import NextSearchQuery
from treeqa.data.loaders import load_examples
from search_reads import read_ids, ROOT
dataset, split, skip, K = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
n = int(sys.argv[5]) if len(sys.argv) > 5 else 100
COMPILED = {"musique": "musique-dev-unexamined-skip0-n100", "hotpotqa": "hotpotqa-dev-unexamined-skip100-n197",
            "2wikimultihopqa": "2wikimultihopqa-dev-unexamined-skip50-n100"}
treeqa.configure("local")
ex = [e for e in load_examples(dataset, split, n=n, skip=skip) if e.get("gold_ids")]
prog = treeqa.load_program(ROOT / "benchmarks/runs" / COMPILED[dataset] / "tor-priced-compile/compiled.json", expect="tor")
class BridgeEntity(dspy.Signature):
    """Read the paragraphs and name the one person, place, work or thing in them that the question
    asks about next: the entity whose own facts answer the rest of the question."""

    question: str = dspy.InputField()
    notes: list[str] = dspy.InputField(desc="paragraphs found so far")
    query: str = dspy.OutputField(desc="the entity's name, a few words")


BRIDGE = len(sys.argv) > 6 and sys.argv[6] == "bridge"  # the entity, then the question, as the query
writer = dspy.Predict(BridgeEntity if BRIDGE else NextSearchQuery)
orig_next, orig_below = rb.ReviewProgram._next_query, rb.ReviewProgram.search_below
def next_query(self, run, passages, outcome, where):
    if run.stats.get("written", 0) < K:
        run.stats["written"] = run.stats.get("written", 0) + 1
        try:
            q = writer(question=run.question, notes=[f"{p.title}: {p.text[:600]}" for p in passages]).query.strip()
        except Exception as exc:
            print("fail", exc); q = ""
        if q and BRIDGE:
            q = f"{q} {run.question}"
        if q:
            run.__dict__.setdefault("_written", set()).add(q)
            return q
    return orig_next(self, run, passages, outcome, where)
def search_below(self, run, query, path, width, where):
    if query in run.__dict__.get("_written", ()):
        on_path = {p.id for p in path}
        hits = [p for p in self._retrieve(run, query, width + len(path), where) if p.id not in on_path][:width]
        linked = self._linked(run, query, path, on_path, width, where)
        taken = {p.id for p in hits}
        return (hits + [p for p in linked if p.id not in taken])[:width + 1]
    return orig_below(self, run, query, path, width, where)
if K: rb.ReviewProgram._next_query, rb.ReviewProgram.search_below = next_query, search_below
shares = []; whole = reach = 0; t0 = time.time(); written = 0
for i, e in enumerate(ex):
    ids, retrieved, _ = read_ids(prog, e.question)
    gold = set(e.gold_ids); f = len(gold & set(ids)); shares.append(f / len(gold)); whole += f == len(gold); reach += gold <= retrieved
    if i % 20 == 19: print(i + 1, round(100 * sum(shares) / len(shares), 1), whole, reach, round((time.time() - t0) / (i + 1), 2), flush=True)
print(dataset, split, skip, "K", K, "gold read", round(100 * sum(shares) / len(ex), 1), "all read", whole, "all retrieved", reach, "n", len(ex), "s/q", round((time.time() - t0) / len(ex), 2))
