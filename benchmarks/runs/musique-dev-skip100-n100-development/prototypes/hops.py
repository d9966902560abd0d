"""Per hop: is MuSiQue's gold paragraph of hop k retrieved / read by the linked compile? (dev pool, no LM)"""
import sys, collections
ROOT_DIR = __import__('pathlib').Path(__file__).resolve().parents[4]; sys.path.insert(0, str(ROOT_DIR)); sys.path.insert(0, str(ROOT_DIR / 'benchmarks'))
import dspy, treeqa
from treeqa.data.loaders import load_examples
from treeqa.data.passage import passage_id
from search_reads import read_ids, ROOT
dspy.configure(lm=None)
split, skip = sys.argv[1], int(sys.argv[2]); changes = __import__('json').loads(sys.argv[3]) if len(sys.argv) > 3 else None
ex = [e for e in load_examples("musique", split, n=100, skip=skip) if e.get("gold_ids")]
prog = treeqa.load_program(ROOT / "benchmarks/runs/musique-dev-unexamined-skip0-n100/tor-priced-compile/compiled.json", overrides=changes, expect="tor")
ret = collections.Counter(); rd = collections.Counter(); tot = collections.Counter(); first_missing = collections.Counter()
root = collections.Counter()
for e in ex:
    ids, retrieved, _ = read_ids(prog, e.question)
    hops = [passage_id(p["title"], p["text"]) for p in e.annotation["gold"]]
    k = len(hops)
    run = prog.search_tree(e.question)
    rootids = {n.id for n in run.nodes if n.parent == 0}
    miss = None
    for i, h in enumerate(hops):
        tot[(k, i)] += 1; ret[(k, i)] += h in retrieved; rd[(k, i)] += h in ids; root[(k,i)] += h in rootids
        if miss is None and h not in retrieved: miss = i
    first_missing[(k, miss)] += 1
for key in sorted(tot): print(f"{key[0]}hop hop{key[1]+1}: n={tot[key]} in root5={root[key]} retrieved={ret[key]} read={rd[key]}")
print("first hop missing:", sorted(first_missing.items(), key=str))
