"""Prototype: concat query = question + title + the paragraph's sentence(s) closest to the question."""
import sys, re
ROOT_DIR = __import__('pathlib').Path(__file__).resolve().parents[4]; sys.path.insert(0, str(ROOT_DIR)); sys.path.insert(0, str(ROOT_DIR / 'benchmarks'))
import numpy as np, dspy, treeqa
import treeqa.programs.review_base as rb
from treeqa.data.loaders import load_examples
from search_reads import read_ids, ROOT
dspy.configure(lm=None)
split, skip, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
changes = __import__('json').loads(sys.argv[4]) if len(sys.argv) > 4 else None
ex = [e for e in load_examples("musique", split, n=100, skip=skip) if e.get("gold_ids")]
prog = treeqa.load_program(ROOT / "benchmarks/runs/musique-dev-unexamined-skip0-n100/tor-priced-compile/compiled.json", overrides=changes, expect="tor")
embed = prog.judge_embed_fn()
orig = rb.concat_query
def sent_query(question, paragraph, max_chars):
    sents = [s for s in re.split(r'(?<=[.!?])\s+', paragraph.text) if s.strip()]
    if len(sents) <= 1: return orig(question, paragraph, max_chars)
    v = np.asarray(embed([question] + sents)); sc = v[1:] @ v[0]
    best = sents[int(np.argmax(sc))]
    if mode == "sent": return f"{question} {paragraph.title}: {best}"
    if mode == "sentonly": return f"{paragraph.title}: {best}"
    return orig(question, paragraph, max_chars)
if mode != "orig": rb.concat_query = sent_query
shares=[]; whole=0; reach=0
for e in ex:
    ids, retrieved, _ = read_ids(prog, e.question)
    gold=set(e.gold_ids); f=len(gold & set(ids)); shares.append(f/len(gold)); whole += f==len(gold); reach += gold <= retrieved
print(mode, changes, "gold read", round(100*sum(shares)/len(ex),1), "all read", whole, "all retrieved", reach, "n", len(ex))
