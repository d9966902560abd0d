"""A finished beam run's answers picked again from its recorded trees, with no LM call
(`treeqa repick`).

`pick` (BeamSearchQA's setting) decides only which state answers, never the search: the states,
their answers and confidences, the beams and the stop do not depend on it. So the trees a run
recorded are the trees a run with the other pick makes (the embedded model decodes greedily,
the prompts are the same), and the new folder gets the records of that run: each question's
answer, EM and F1 from the state the program's own rule (`voted`) picks, `tree.best` and
`tree.settings.pick` set to match, everything else (calls, tokens, seconds, recall) the source
run's. Its spec.json is the source's with `pick` added and `_repicked_from` naming the source;
its summary.json says the command that made it, so the benchmarks' tools read it like any
evaluate folder.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from treeqa.evaluation.metrics import exact_match, f1_score
from treeqa.evaluation.records import RECORDS_NAME, read_records, records_file, summarize
from treeqa.evaluation.runs import versions
from treeqa.programs import PROGRAMS
from treeqa.programs.beam_search import BeamSearchQA, SearchState, voted

STATE_FIELDS = {f.name for f in dataclasses.fields(SearchState)} - {"passages"}


class RepickError(ValueError):
    """A folder that cannot be re-picked (not a beam run, no records) or written into."""


@dataclass(frozen=True)
class Repicked:
    """What a re-pick did: the questions, the answers that changed, EM before and after."""

    records: int
    changed: int
    em_from: float
    em_to: float


def repicked(record: dict, pick: str) -> dict:
    """The record as a run with `pick` would have written it (see the module doc)."""
    tree = record.get("tree")
    if not tree or "states" not in tree:  # a question that failed before any tree: nothing to pick from
        return record
    states = [SearchState(**{k: v for k, v in s.items() if k in STATE_FIELDS}) for s in tree["states"]]
    by_id = {s.id: s for s in states}
    last_beam = (tree.get("beams") or [[]])[-1]  # ranked, most confident first
    # the paper's pick (line 26): the most confident state read (a judged beam reads only that one,
    # and the next of the beam where its reading failed)
    best = next((by_id[i] for i in last_beam if i in by_id and by_id[i].answer is not None), None)
    if pick == "vote":
        unread = [s.id for s in states if s.answer is None and s.status != "failed"]
        if unread:
            raise RepickError(f"question {record.get('id')}: a judged beam read only the state that answers "
                              f"(states {unread[:5]} unread), and a vote needs every state's answer: evaluate "
                              "again with --param pick=vote")
        best = voted(states, prefer=best) or best
    answer = best.answer if best is not None else ""
    new_tree = {**tree, "best": best.id if best is not None else None,
                "settings": {**tree.get("settings", {}), "pick": pick}}
    return {**record, "prediction": answer, "em": exact_match(answer, record["answers"]),
            "f1": round(f1_score(answer, record["answers"]), 4), "tree": new_tree}


def _source_spec(run: Path) -> dict:
    """The run's spec: an evaluate folder's own, or an optimize run's (for its `compiled` side)."""
    spec_path = run / "spec.json"
    if not spec_path.is_file() and (run.parent / "spec.json").is_file():  # an optimize run's side
        spec_path = run.parent / "spec.json"
    if not spec_path.is_file():
        raise RepickError(f"{run}: no spec.json (an evaluate folder, or an optimize run's compiled side)")
    spec = json.loads(spec_path.read_text())
    program = PROGRAMS.get(spec.get("program"))
    if not (isinstance(program, type) and issubclass(program, BeamSearchQA)):
        raise RepickError(f"{run}: a {spec.get('program')!r} run; only {BeamSearchQA.name} runs have a pick")
    if (spec.get("params") or {}).get("_replay_of"):  # only its best state was read again
        raise RepickError(f"{run}: a replay; its other states hold the recorded run's answers, so a new pick "
                          "would mix two readings: re-pick the recorded run instead")
    return spec


def repick_run(run: str | Path, out: str | Path, pick: str, command: str) -> Repicked:
    """Write into `out` the records, spec and summary of `run` re-picked with `pick`;
    `command` is what the summary records as the command that made them."""
    run, out = Path(run), Path(out)
    spec = _source_spec(run)
    records = read_records(records_file(run))
    if not records:
        raise RepickError(f"{run}: no records to pick from")
    if out.exists() and not out.is_dir():
        raise RepickError(f"{out} is a file: pick into a new folder")
    if out.is_dir() and any(out.iterdir()):  # records, or a user's files: a pick never writes over them
        held = "records" if records_file(out).exists() else "files"
        raise RepickError(f"{out} already holds {held}: pick into a new folder")
    out_records = [repicked(r, pick) for r in records]  # a refusal leaves no folder behind
    out.mkdir(parents=True, exist_ok=True)
    with open(out / RECORDS_NAME, "w") as f:
        for record in out_records:
            f.write(json.dumps(record) + "\n")
    spec = {**spec, "params": {**(spec.get("params") or {}), "pick": pick, "_repicked_from": str(run)}}
    (out / "spec.json").write_text(json.dumps(spec, indent=2))
    source = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    summary = {"summary": summarize(out_records), "spec": spec, "data": source.get("data"),
               "command": command, "versions": versions()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    changed = sum(a.get("prediction") != b.get("prediction") for a, b in zip(records, out_records, strict=True))
    em_from, em_to = (100 * sum(r["em"] for r in rs) / len(rs) for rs in (records, out_records))
    return Repicked(len(records), changed, em_from, em_to)
