"""Running programs over questions and reading what they did, one concept a module:

- `metrics`: EM, F1, recall@k and answer hits, as the QA literature computes them
- `records`: a run's per-question JSONL records: read back, appended, rewritten, summarized
- `loop`: the run loop (one record per question as it finishes, resumable, a time limit each)
- `runs`: one run as a spec and a folder (its lock, its command, its summary)
- `tables`: Markdown reports of runs and of paired comparisons
- `stats`: bootstrap intervals, paired comparisons, McNemar's test, AUC
- `decisions`: the searches' decisions against the annotations
- `replay`: a ToR run's recorded searches read back, for a compile that changes only the reading

Nothing is imported here, so `treeqa.evaluation.metrics` costs no DSPy import.
"""
