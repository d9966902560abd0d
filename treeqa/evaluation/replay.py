"""Answer again from recorded searches: a compiled ToR (or beam) that differs from a finished run's
only in its reader reads that run's trees instead of growing them again.

A ToR answer is a search (every LM call but one) and a reading of what it found (the reader's
one call). Compiles that change only the reading (`read_top`, the reader's demos and
instructions: `path-judge+reader`) leave the search as it was, call for call: greedy decoding,
the same judge, the same review and query predictors. On two cores a MuSiQue search with the
path judge costs 45-257 s and the reading about 10, so measuring a new reading on 100 questions
takes an hour's replay of reads instead of five hours of searches. The run's records hold each
tree (nodes, verdicts, analyses, paragraph ids); `rebuild_run` turns one back into the
`ReviewRun` the program's own `answer_from` reads, with the paragraphs taken from the corpus by
id. `check_same_search` refuses a program whose search could differ from the recorded one's.
The beam under a path judge reads alike: the judge ranks its states by their passages, never by
their answers, so its recorded best state is read again (`BeamSearchQA.answer_from_tree`).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import stat
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from statistics import mean, median
from typing import Any

import dspy

from treeqa.data.passage import Passage
from treeqa.evaluation.records import read_records, records_file
from treeqa.evaluation.runs import EvalSpec, compiled_params, read_spec, run_evaluation
from treeqa.programs import PROGRAMS, build_program
from treeqa.programs.beam_search import BeamSearchQA
from treeqa.programs.compiled import CompiledFile, CompiledProgramError, load_program
from treeqa.programs.review_run import ReviewNode, ReviewRun
from treeqa.retrievers.base import Retriever

# settings only the reading uses: a replay may change them; every other setting shapes the search
READER_SETTINGS = frozenset({"read_top", "read_root", "max_context_chars", "max_paragraph_chars"})
# per tree shape: the settings only the reading uses (a replay may change them), and the one of them
# that changes the reader's inputs (its compiled demos and instructions no longer fit: it starts zero-shot)
READINGS = {"reviews": (READER_SETTINGS | {"fusion"}, "fusion"), "states": (frozenset({"reading"}), "reading")}
# readers that read no analysis: a search under a path judge writes none for them (its accept
# costs no review) and otherwise searches alike, so a search recorded for any reader can be read
# by these; a reader of analyses can read only a search that wrote them
NO_ANALYSIS = frozenset({"paragraph", "passages"})
# A path judge refitted on the same annotations on another CPU differs in its weights' last digits
# (MiniLM embeds in float32): on MuSiQue the largest difference was 4.3e-7. A weight moved by
# 1e-5 moves a standardised score's logit by about 1e-4, a decision only on a path that close to
# its threshold; a judge fitted on other paths differs in the second digit.
WEIGHT_TOLERANCE = 1e-5


class ReplayError(ValueError):
    """A recorded run that cannot be replayed with this program (or at all)."""


class NoSearch(Retriever):
    """Stands in for the index where a compiled file is rewritten, not run: its predictors are
    needed, not its corpus, so no index is loaded (or built) for it."""

    passages = []

    def search_batch(self, queries: list[str], k: int):
        raise RuntimeError("a program loaded to rewrite its compiled file does not search")


def reading_of(program: str | None) -> tuple[frozenset, str]:
    """(the settings only the reading uses, the one that changes the reader's inputs) of a
    program: ToR's (READER_SETTINGS and `fusion`) for one that is not replayed."""
    return READINGS.get(getattr(PROGRAMS.get(program), "tree_shape", None), READINGS["reviews"])


def with_reading(found: CompiledFile, overrides: Mapping[str, Any]) -> CompiledFile:
    """`found` with the reading settings `overrides` in place (`reading_of` the program; its
    search stays as compiled). A new fusion (beam: reading) starts the reader zero-shot: its
    compiled demos and instructions were written for the other input. `fusion=passages` and the
    beam's `reading=passages` are rta's reader, so the program reads its search in the prompt an
    rta adapter was trained on."""
    reading, switch = reading_of(found.program)
    if set(overrides) - reading:
        raise CompiledProgramError(f"{found.path}: a compiled program keeps its search as compiled; only its "
                                   f"reading changes ({', '.join(sorted(reading))}), not "
                                   f"{', '.join(sorted(set(overrides) - reading))}")
    settings, preset = found.build_settings()
    if not overrides:
        return found
    try:  # the program built with them: a setting it lacks (read_top on rta) is one line here
        fresh = build_program(found.program, NoSearch(), preset=preset, **{**settings, **overrides})
    except (TypeError, ValueError) as exc:
        raise CompiledProgramError(f"{found.path}: {exc}") from None
    state = dict(found.state)
    if switch in overrides and overrides[switch] != settings.get(switch):
        state[type(fresh).reader] = getattr(fresh, type(fresh).reader).dump_state()
    return dataclasses.replace(found, settings={**settings, **overrides}, state=state)


def rebuild_run(tree: dict[str, Any], passages: Mapping[str, Passage]) -> ReviewRun:
    """The `ReviewRun` a ToR search left, from its recorded tree (`prediction.tree`).

    What the reading uses is rebuilt in the order the search made it: the nodes; the paragraphs
    retrieved, each expansion's children in the order the depth-first visit made the
    expansions; the ids judged relevant, in visit order; the evidence pool, one piece per
    accepted node (its path from the first level down, with its analysis).
    """
    run = ReviewRun(tree["question"])
    check_tree(tree)
    names = {f.name for f in dataclasses.fields(ReviewNode)}
    run.nodes = [ReviewNode(**{k: v for k, v in values.items() if k in names}) for values in tree["nodes"]]
    children: dict[int, list[ReviewNode]] = defaultdict(list)
    for node in run.nodes[1:]:
        children[node.parent].append(node)

    def paragraph(node: ReviewNode) -> Passage:
        if node.id not in passages:
            raise ReplayError(f"paragraph {node.id} ({node.title!r}) of the recorded tree is not in the corpus")
        return passages[node.id]

    for node in run.nodes:
        if node.expanded:
            run.retrieved.extend(paragraph(child) for child in children[node.node])
        if node.id is not None and node.relevant:
            run.relevant_ids.setdefault(node.id)
        if node.action == "accept":
            path, at = [], node
            while at.parent is not None:
                path.append(paragraph(at))
                at = run.nodes[at.parent]
            run.add_evidence(path[::-1], node.analysis, node.node)
    run.stats.update({k: v for k, v in tree.get("stats", {}).items() if k in run.stats})
    return run


def check_tree(tree: dict[str, Any]) -> None:
    """Refuse a recorded tree that is not one: nodes numbered 0, 1, 2, ... from the root, each
    node's parent an earlier node (a search adds a child after its parent), so that walking up
    from any node ends at the root. A hostile record whose node is its own parent (or any cycle)
    would otherwise loop until memory runs out."""
    nodes = tree.get("nodes") if isinstance(tree, dict) else None
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, dict) for n in nodes):
        raise ReplayError("the recorded tree has no list of nodes")
    for i, values in enumerate(nodes):
        number, parent = values.get("node"), values.get("parent")
        if type(number) is not int or number != i:
            raise ReplayError("the recorded tree's nodes are not numbered 0, 1, 2, ... from the root")
        if i == 0 and parent is not None:
            raise ReplayError("the recorded tree's root has a parent: not a tree")
        if i > 0 and not (type(parent) is int and 0 <= parent < i):
            raise ReplayError(f"the recorded tree's node {i} has parent {repr(parent)[:40]}, not an earlier node "
                              "(a cycle, or not a tree): refused")


def check_same_search(source: CompiledFile, target: CompiledFile) -> None:
    """Refuse a `target` program whose searches could differ from `source`'s: another program,
    dataset, corpus or retriever, another setting outside READER_SETTINGS (a fusion only where
    the search wrote what it reads: NO_ANALYSIS), or other demos or instructions on any predictor
    but the reader."""
    src_state, state = source.state, target.state
    problems = []
    for key in ("program", "dataset", "retriever", "corpus"):
        if getattr(source, key) != getattr(target, key):
            problems.append(f"{key}: {getattr(source, key)!r} there, {getattr(target, key)!r} here")
    program = replayable(target.program)
    # a setting one file lacks is at its default (a setting added since leaves the search as it was)
    defaults = {k: f.default for k, f in program.settings_model().model_fields.items()}
    src_settings, settings = ({**defaults, **f.build_settings()[0]} for f in (source, target))
    reading = reading_of(target.program)[0]
    for key in sorted((set(src_settings) | set(settings)) - reading):
        if not same_setting(src_settings.get(key), settings.get(key)):
            problems.append(f"setting {key} differs")
    fusions = (src_settings.get("fusion"), settings.get("fusion"))
    if fusions[0] != fusions[1] and fusions[1] not in NO_ANALYSIS and (
            fusions[0] in NO_ANALYSIS and src_settings.get("path_judge") is not None):
        problems.append(f"setting fusion differs: {fusions[1]} reads the analyses a {fusions[0]} search under "
                        "a path judge did not write")
    if program.tree_shape == "states":
        problems += _beam_problems(src_settings, settings)
    if src_settings.get("max_evidence") is not None:  # the search stopped early: its last children have no nodes
        problems.append("the recorded run set max_evidence, so its trees do not hold every paragraph it retrieved")
    for name in sorted((set(src_state) | set(state)) - {program.reader}):
        mine, theirs = state.get(name), src_state.get(name)
        if isinstance(mine, dict) or isinstance(theirs, dict):
            for part in ("demos", "signature"):
                if (mine or {}).get(part) != (theirs or {}).get(part):
                    problems.append(f"predictor {name}: its {part} differ")
    if problems:
        raise ReplayError("this program's search is not the recorded run's, so its trees cannot be "
                          "replayed:\n  " + "\n  ".join(problems))


def _beam_problems(src_settings: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """Why a recorded beam search cannot be read again exactly: without a path judge its states
    are ranked by Score, which reads each answer; with pick=vote every state's answer counts."""
    problems = []
    if src_settings.get("path_judge") is None:
        problems.append("the recorded beam had no path judge: Score ranked its states by their answers, so a "
                        "new reader could pick another state")
    if "vote" in (src_settings.get("pick"), settings.get("pick")):
        problems.append("pick=vote reads every state's answer: only a pick=beam search is read again")
    return problems


def same_setting(a: Any, b: Any) -> bool:
    """Equal, numbers within WEIGHT_TOLERANCE (absolute or relative), through lists and dicts."""
    if isinstance(a, bool) or isinstance(b, bool) or not all(isinstance(x, (int, float)) for x in (a, b)):
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same_setting(a[k], b[k]) for k in a)
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            return len(a) == len(b) and all(same_setting(x, y) for x, y in zip(a, b, strict=True))
        return a == b
    return math.isclose(a, b, rel_tol=WEIGHT_TOLERANCE, abs_tol=WEIGHT_TOLERANCE)


def recorded_trees(records: list[dict], reader: str, shape: str = "reviews") -> dict[str, dict]:
    """question -> (tree, the search's cost: every call but the `reader`'s) of a run's records
    (trees of `shape`: "reviews" for ToR, "states" for the beam); failed records are left out
    (their questions are not replayed until the run has them)."""
    trees = {}
    for record in records:
        tree = record.get("tree")
        key = "states" if shape == "states" else "nodes"
        if not isinstance(tree, dict) or record.get("error") or not tree.get(key):
            continue
        try:
            if shape == "states":
                BeamSearchQA.check_recorded_tree(tree)
            else:
                check_tree(tree)
        except ValueError as exc:
            raise ReplayError(f"record {str(record.get('id'))[:80]!r}: {exc}") from None
        split = "lm_seconds_by_predictor" in record  # records made before it was kept cannot split out the reading
        fuse_calls = (record.get("lm_calls_by_predictor") or {}).get(reader, 0)
        fuse_seconds = (record.get("lm_seconds_by_predictor") or {}).get(reader, 0.0)
        if shape == "states" and fuse_calls > 1:  # the beam answers every state: one of them is the reading
            fuse_calls, fuse_seconds = 1, fuse_seconds / fuse_calls
        trees[record["question"]] = {"tree": tree, "run": record.get("run"),
                                     "search_lm_calls": record.get("lm_calls", 0) - fuse_calls,
                                     "search_seconds": round(record.get("seconds", 0.0) - fuse_seconds, 3),
                                     "includes_reading": not split}
    return trees


def corpus_passages(store, ids: set[str]) -> dict[str, Passage]:
    """The paragraphs of `ids` from a retriever's passages (one pass over the corpus)."""
    found = {}
    for p in store:
        if p.id in ids:
            found[p.id] = p
            if len(found) == len(ids):
                break
    return found


class ReplayedSearch(dspy.Module):
    """A ToR that reads a recorded run's trees instead of searching: calling it makes one LM
    call, the program's reader on the rebuilt search. A question without a recorded tree is an
    error for that question."""

    def __init__(self, program: dspy.Module, trees: Mapping[str, dict], passages: Mapping[str, Passage]):
        super().__init__()
        self.program = program
        self._trees = dict(trees)
        self._passages = dict(passages)

    def recorded(self, examples: list) -> list:
        """The examples whose searches were recorded, in order."""
        return [ex for ex in examples if ex.question in self._trees]

    def forward(self, question: str) -> dspy.Prediction:
        found = self._trees.get(question)
        if found is None:
            raise ReplayError("the recorded run has no search for this question")
        if hasattr(self.program, "answer_from_tree"):  # the beam
            try:
                prediction = self.program.answer_from_tree(found["tree"], self._passages)
            except ValueError as exc:
                raise ReplayError(str(exc)) from None
        else:
            prediction = self.program.answer_from(rebuild_run(found["tree"], self._passages))
        prediction.tree["replayed"] = {k: found[k] for k in ("run", "search_lm_calls", "search_seconds",
                                                              "includes_reading")}
        return prediction


class _NeverSearched(Retriever):
    """What a program is built with when only its settings and state are read."""

    passages: list[Passage] = []

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        raise RuntimeError("this program was built to read its settings, not to search")


def source_recipe(records_dir: Path, recorded) -> CompiledFile:
    """The program a recorded run searched with: an optimize run's `compiled.json` beside its
    `compiled/` records, the file an `evaluate --compiled` run names, or, for a zero-shot run,
    the program its spec builds (no demos, the signatures' own instructions)."""
    if records_dir.name == "compiled" and (records_dir.parent / "compiled.json").is_file():
        return CompiledFile.read(records_dir.parent / "compiled.json")
    named = recorded.params.get("_compiled")
    if named:
        if not Path(named).is_file():
            raise ReplayError(f"{records_dir} searched with {named}, which is not here: name the file with "
                              "--source-compiled")
        return CompiledFile.read(named)
    program = build_program(recorded.program, _NeverSearched(), preset=recorded.preset, **recorded.params)
    recipe = {"program": recorded.program, "dataset": recorded.dataset, "retriever": recorded.retriever,
              "corpus": recorded.corpus, "settings": program.method_settings}
    # as a file reads back
    return CompiledFile.of(json.loads(json.dumps(recipe)), json.loads(json.dumps(program.dump_state())))


def replay_run(records_dir: Path, compiled: str | Path | CompiledFile, source: str | Path | None = None,
               lm: str = "local",
               api_base: str | None = None, out: str | Path | None = None,
               cache: bool = True, overrides: dict[str, Any] | None = None,
               side: str | None = None) -> tuple[dict[str, Any], int, int]:
    """Evaluate `compiled` (with `overrides` of its reading settings) on the sample of the ToR run
    in `records_dir`, reading its recorded searches: (the evaluation's result, questions
    replayed, questions in the sample). The run's folder is only read; the replay's records go
    to `out` and a rerun resumes them. `compiled` is read once (a CompiledFile is taken as read)."""
    recorded = recorded_spec(records_dir)
    found = compiled if isinstance(compiled, CompiledFile) else CompiledFile.read(compiled)
    compiled = found.path
    searched = (recorded.retriever, recorded.corpus)
    if searched != (found.retriever, found.corpus):
        raise ReplayError(f"{records_dir} searched {searched[1] or recorded.dataset} with {searched[0]}; "
                          f"{compiled} searches {found.corpus or found.dataset} with {found.retriever}")
    try:
        target = with_reading(found, overrides or {})
    except CompiledProgramError as exc:
        raise ReplayError(str(exc)) from None
    settings = target.build_settings()[0]
    check_same_search(CompiledFile.read(source) if source else source_recipe(records_dir, recorded), target)
    kind = replayable(found.program)
    trees = recorded_trees(run_records(records_dir, recorded), kind.reader, kind.tree_shape)
    if not trees:
        raise ReplayError(f"{records_file(records_dir)} holds no recorded search to replay")
    program = load_program(target, expect=found.program)
    ids = set().union(*(paragraph_ids(found["tree"]) for found in trees.values()))
    passages = corpus_passages(program.retriever.passages, ids)
    if len(passages) < len(ids):
        raise ReplayError(f"{len(ids) - len(passages)} paragraphs of the recorded trees are not in the "
                          f"{recorded.dataset} corpus this program searches: not the run's corpus")
    replayer = ReplayedSearch(program, trees, passages)
    params = {**settings, **compiled_params(compiled), "_replay_of": recorded.key()}
    spec = EvalSpec(program=found.program, dataset=recorded.dataset, split=recorded.split, n=recorded.n,
                    seed=recorded.seed, skip=recorded.skip, ids=recorded.ids, sample=recorded.sample, lm=lm,
                    api_base=api_base, retriever=recorded.retriever, corpus=recorded.corpus, params=params,
                    cache=cache, side=side)
    counted: list[int] = []

    def only(examples: list) -> list:
        kept = replayer.recorded(examples)
        counted.append(len(kept))
        return kept

    result = run_evaluation(spec, out, program=replayer, only=only)
    result["searched"] = record_search_cost(result, records_dir)
    return result, counted[0], recorded.n


def paragraph_ids(tree: dict[str, Any]) -> set[str]:
    """The ids of every paragraph a recorded tree holds (a ToR's nodes, a beam's states)."""
    if "states" in tree:
        return {p["id"] for state in tree["states"] for p in state["passages"]}
    return {n["id"] for n in tree["nodes"] if n.get("id")}


def record_search_cost(result: dict[str, Any], records_dir: Path) -> dict[str, Any]:
    """Add to the replay's summary.json what its questions' recorded searches cost (a replay's own
    seconds and calls are the reading's alone; the program's cost is the two together).
    `includes_reading` counts the records too old to split the recorded reading out (their
    figures are the whole recorded question's)."""
    searched = [r["tree"]["replayed"] for r in result["records"] if (r.get("tree") or {}).get("replayed")]
    cost = {"from": str(records_dir), "questions": len(searched)}
    if searched:
        seconds = [s["search_seconds"] for s in searched]
        cost.update(search_lm_calls_per_q=round(mean(s["search_lm_calls"] for s in searched), 2),
                    search_seconds_per_q=round(mean(seconds), 2), search_seconds_median=round(median(seconds), 2),
                    includes_reading=sum(bool(s.get("includes_reading")) for s in searched))
    path = Path(result["out"]) / "summary.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["replayed"] = cost
    path.write_text(json.dumps(doc, indent=2))
    return cost


def check_replay_source(records_dir: Path, spec) -> None:
    """Refuse, before a compile, a `records_dir` that is not a recorded run of `spec`'s sample
    (an EvalSpec: dataset, split, questions, seed, skip) by a program that reads apart from its search."""
    recorded = recorded_spec(records_dir)
    replayable(spec.program)
    sample = ("program", "dataset", "split", "n", "seed", "skip", "retriever", "corpus")
    differ = [f"{k} {getattr(recorded, k)!r} there, {getattr(spec, k)!r} here" for k in sample
              if getattr(recorded, k) != getattr(spec, k)]
    if differ:
        raise ReplayError(f"{records_dir} is not a run of these questions: " + "; ".join(differ))
    kind = replayable(spec.program)
    recorded_trees(run_records(records_dir, recorded), kind.reader, kind.tree_shape)  # each a tree, before a compile


def run_records(records_dir: Path, recorded) -> list[dict]:
    """The records of the run whose spec is `recorded`, as `evaluate` would resume them: refused
    when its records file (`records_file`: plain or compressed) is not a plain file, or holds
    records another spec wrote."""
    try:
        path = records_file(records_dir)
    except ValueError as exc:
        raise ReplayError(str(exc)) from exc
    if (kind := not_a_records_file(path)) is not None:
        raise ReplayError(f"{path} is {kind}, not a file of records")
    records = read_records(path)
    foreign = sorted({str(r["run"]) for r in records if r.get("run") not in (None, recorded.key())})
    if foreign:
        raise ReplayError(f"{path} holds records of another run spec ({', '.join(foreign)}; its spec.json "
                          f"is {recorded.key()}): not this run's records")
    return records


def not_a_records_file(path: Path) -> str | None:
    """What `path` is when it is not a plain file that can be read (None when it is one):
    reading a FIFO would wait forever, a folder or a symlink loop would read as no records."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    return "a socket or device"


def recorded_spec(records_dir: Path):
    """The EvalSpec of the run in `records_dir` (the sample its records answer)."""
    spec_file = records_dir / "spec.json"
    if not spec_file.is_file():
        raise ReplayError(f"{records_dir} is not a run folder (no spec.json)")
    try:
        return read_spec(spec_file)
    except ValueError as exc:
        raise ReplayError(str(exc)) from exc


def replayable(name: str | None):
    """The class of program `name`, if it reads apart from its search (ToR's `answer_from`, the
    beam's `answer_from_tree`)."""
    program = PROGRAMS.get(name)
    if not (hasattr(program, "answer_from") or hasattr(program, "answer_from_tree")):
        raise ReplayError(f"{name!r} does not read apart from its search (no answer_from): only ToR and beam runs "
                          "are replayed")
    return program
