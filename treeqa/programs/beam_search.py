"""BeamSearchQA: the ALLIES beam search (Algorithm 1 of `papers/allies_beam_search.txt`).

A state is ⟨question, sub-questions, evidences, answer, confidence⟩. Two seed states
(answer with no evidence; answer with evidence for the question itself) form beam 0.
At each depth every state of the previous beam asks for up to K new sub-questions; each
one gets evidence and becomes a new state that answers the question from the enlarged
history and scores that answer. The new states are pruned to the B most confident; the
search stops as soon as a kept state reaches the threshold S, and the answer is the most
confident state of the last beam (`pick="beam"`, the paper's line 26), or, with `pick="vote"`,
the answer with the most confidence summed over every answered state of the tree.

Compiled with `--optimizer path-judge`, a state's confidence is not Score's written number
(0.9 for most states on a 1.5B model, so ties decide) but a `PathJudge`'s probability that
the paragraphs behind the state's evidence hold what the question needs, and the search
stops at the judge's cut: no Score call is made.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import dspy

from treeqa.data.answers import normalize_answer
from treeqa.data.corpus import Passage
from treeqa.judging.path_judge import PathJudge, check_path_judge
from treeqa.programs.common import (
    SharedRef,
    check_question,
    check_retriever,
    check_threads,
    emit,
    map_calls,
    record_failure,
    safe_call,
    text_key,
)
from treeqa.programs.judged import JudgedProgram
from treeqa.retrievers.base import Retriever
from treeqa.retrievers.encoder import EmbedFn
from treeqa.signatures import budget
from treeqa.signatures.answer import Answer, AnswerFromPassages, clean_answer
from treeqa.signatures.ask import Ask
from treeqa.signatures.evidence import GenerateBackground, SummarizeEvidence
from treeqa.signatures.formatting import format_history, format_passages
from treeqa.signatures.score import Score

EVIDENCE_MODES = ("retrieval", "genread", "none")
PICKS = ("beam", "vote")

# Table 6 of the paper; `passages` is unused with GENREAD evidence.
PRESETS: dict[str, dict[str, Any]] = {
    "nq": dict(threshold=0.8, beam_size=2, depth=2, passages=2, max_queries=2, evidence="retrieval"),
    "triviaqa": dict(threshold=0.8, beam_size=3, depth=1, passages=2, max_queries=2, evidence="genread"),
    "webq": dict(threshold=0.8, beam_size=3, depth=2, passages=2, max_queries=3, evidence="genread"),
}

NO_PASSAGES = "(no passages found)"
READINGS = ("history", "passages")


def passages_as_evidence(passages: Iterable[Passage], chars: int) -> str:
    """Passages written as one evidence with no LM call: each "Title: text" cut to `chars`."""
    return " ".join(p.as_text(chars) for p in passages)


class PassageLog:
    """Every passage a program saw, first-retrieved first, each id once (for recall@k)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Passage] = {}

    def add(self, passages: Iterable[Passage]) -> None:
        for p in passages:
            self._by_id.setdefault(p.id, p)

    @property
    def passages(self) -> list[Passage]:
        return list(self._by_id.values())


def same_question(a: str, b: str, overlap: float = 0.8) -> bool:
    """Whether two questions ask the same thing: equal up to case and punctuation, or sharing
    at least `overlap` of their words (Jaccard), which catches a small model's light rewording
    of a question it was told not to repeat."""
    words_a, words_b = set(text_key(a).split()), set(text_key(b).split())
    if not words_a or not words_b:
        return words_a == words_b
    return len(words_a & words_b) / len(words_a | words_b) >= overlap


@dataclass
class SearchState:
    """One node of the search tree; `status` is "kept", "pruned" or "failed" (never answered).
    `answer` is None where a path judge ranked the state and it was never read: under a judge
    with `pick="beam"` only the state that answers is read."""

    id: int
    depth: int
    parent: int | None
    sub_questions: list[str]
    evidences: list[str]
    passages: list[Passage] = field(default_factory=list)  # behind the newest evidence
    answer: str | None = ""
    confidence: float = 0.0
    status: str = "kept"
    asked: list[str] | None = None  # sub-questions proposed when this state was expanded
    failures: list[dict] = field(default_factory=list)
    judge_path: list[str] | None = None  # with a path judge: the ids of the paragraphs it judged best

    @property
    def history(self) -> list[tuple[str, str]]:
        return list(zip(self.sub_questions, self.evidences, strict=True))

    def to_dict(self) -> dict:
        return {
            "id": self.id, "depth": self.depth, "parent": self.parent,
            "sub_questions": list(self.sub_questions), "evidences": list(self.evidences),
            "passages": [{"id": p.id, "title": p.title} for p in self.passages],
            "answer": self.answer, "confidence": self.confidence, "status": self.status,
            "asked": None if self.asked is None else list(self.asked), "failures": list(self.failures),
            "judge_path": None if self.judge_path is None else list(self.judge_path),
        }


def rank(states: list[SearchState]) -> list[SearchState]:
    """Most confident first; ties go to the state created first, so the order is deterministic."""
    return sorted(states, key=lambda s: (-s.confidence, s.id))


def voted(states: Iterable[SearchState], prefer: SearchState | None = None) -> SearchState | None:
    """The most confident state giving the answer whose states' confidences sum highest, over
    every answered state of the tree (pruned ones and earlier beams' too). Answers are compared
    as EM compares them (`normalize_answer`). Where answers tie, no answer has more agreement
    behind it, so `prefer`'s answer wins when it is among them (the program passes its own
    pick, the last beam's best), else the answer given first. A 1.5B model's Score ties most
    states at the top of a beam (the decision figures), so the first-made state wins there;
    agreement among the tree's states is evidence the tie-break throws away."""
    totals: dict[str, float] = {}
    best: dict[str, SearchState] = {}
    for state in sorted(states, key=lambda s: s.id):
        key = normalize_answer(state.answer) if state.status != "failed" else ""
        if not key:
            continue
        totals[key] = totals.get(key, 0.0) + state.confidence
        if key not in best or state.confidence > best[key].confidence:
            best[key] = state
    if not totals:
        return None
    top = max(totals.values())
    tied = [key for key, total in totals.items() if abs(total - top) < 1e-9]  # dict order: first given first
    preferred = normalize_answer(prefer.answer) if prefer is not None else ""
    return best[preferred if preferred in tied else tied[0]]


def _recorded_state(values: dict, passages: dict[str, Passage]) -> SearchState:
    """A recorded state (`SearchState.to_dict`) back as one, its passages taken from the corpus by id."""
    missing = [p["id"] for p in values["passages"] if p["id"] not in passages]
    if missing:
        raise ValueError(f"paragraph {missing[0]} of the recorded search is not in the corpus")
    try:
        return SearchState(values["id"], values["depth"], values["parent"], list(values["sub_questions"]),
                           list(values["evidences"]), [passages[p["id"]] for p in values["passages"]],
                           None if values["answer"] is None else str(values["answer"]),
                           float(values["confidence"]), values["status"],
                           values.get("asked"), list(values.get("failures") or []), values.get("judge_path"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the recorded tree's state {values.get('id')} is not a state ({exc!r}): refused") from None


class _Search:
    """One question's search: its states in creation order (a state's id is its index) and the
    passages seen. A fresh one per `forward` call, so questions answered at once share nothing."""

    def __init__(self, question: str, judge: PathJudge | None):
        self.question, self.judge = question, judge
        self.states: list[SearchState] = []
        self.seen = PassageLog()

    def behind(self, state: SearchState) -> list[Passage]:
        """The passages behind every evidence on the state's path, root first."""
        lineage = [state]
        while lineage[-1].parent is not None:
            lineage.append(self.states[lineage[-1].parent])
        return [p for s in reversed(lineage) for p in s.passages]

    def new_state(self, parent: SearchState | None, sub_question: str | None) -> SearchState:
        """Register a state (ids in creation order); its LM calls come later, in `BeamSearchQA._fill`."""
        depth = 0 if parent is None else parent.depth + 1
        sub_questions = (parent.sub_questions if parent else []) + ([sub_question] if sub_question else [])
        evidences = list(parent.evidences) if parent else []
        state = SearchState(len(self.states), depth, parent.id if parent else None, sub_questions, evidences)
        self.states.append(state)
        return state


class BeamSearchQA(JudgedProgram):
    """ALLIES: answer a question by beam search over (sub-question, evidence) histories.

    Args:
        retriever: searches the corpus; required when `evidence="retrieval"`, unused otherwise.
        max_queries: K, the most sub-questions one state may ask.
        depth: D, the most expansion rounds after the two seeds (0 keeps only the seeds).
        passages: N, passages retrieved per sub-question and summarised into one evidence.
        threshold: S, stop after the first depth whose kept states include one this confident.
        beam_size: B, states kept at each depth.
        evidence: "retrieval" (retrieve N passages and summarise them), "genread" (the model
            writes a background document for the sub-question) or "none" (the history holds
            sub-questions only, and the evidence-based seed is skipped).
        passage_chars: each passage is cut to this many characters before summarising (and
            where `reading="passages"` reads them).
        evidence_chars: None (the paper): a sub-question's passages are summarised into its
            evidence by the LM (SummarizeEvidence). A number: the evidence is the passages
            themselves, each cut to that many characters, written with no LM call. Under a path
            judge with `reading="passages"` no summary is ever read but Ask's, and the summaries
            took about two thirds of the beam's LM seconds (HotpotQA 197: 38 of 57 s a
            question): this is the beam's cheap search. Retrieval evidence only.
        threads: with more than 1, the Ask calls of one depth, and then the evidence, Answer
            and Score chains of all its new states, go out concurrently (remote endpoints);
            states, ids and the retrieved order are the same as with 1.
        check_seeds: also stop before any expansion when a seed reaches S. Algorithm 1 checks
            the threshold only after each expansion (the default); Section 3.4 can be read
            either way, and checking the seeds saves most calls on easy questions.
        path_judge: a judge compiled from the training annotations (`--optimizer path-judge`,
            `treeqa.judging.path_judge`, plain numbers). A state's confidence is then its probability
            that the best path of up to two of the passages behind the state's evidences (its
            own and its ancestors') is sufficient, S is the judge's sufficiency cut
            (`threshold` is unused), and Score is not called; where the judge fails (no
            encoder), that state is scored by Score as without one and the failure recorded.
        embed_fn: texts -> normalised vectors, the judge's encoder (default: the dense
            retriever's MiniLM, the one it was fitted with).
        pick: which state answers: "beam", the most confident state of the last beam (Algorithm
            1, line 26), or "vote", the answer with the most confidence summed over every
            answered state of the tree (`voted`). The search itself is the same either way.
        reading: what a state's answer is read from: "history" (the paper's Answer: the
            sub-questions and their summarised evidence) or "passages" (rta's reader,
            `AnswerFromPassages`, shown the distinct passages behind the state, root first, so
            that a LoRA adapter trained on rta's reads fits it as trained). Under a path judge
            the search never reads an answer, so a recorded search can be read again either
            way (`treeqa replay`).

    Example:
        >>> program = BeamSearchQA.preset("nq", retriever=get_retriever("nq"))
        >>> pred = program(question="who wrote the opera carmen")
        >>> pred.answer, pred.confidence, len(pred.tree["states"])

    The result also carries `tree` (every state as a JSON-ready dict, plus the beams and
    why the search stopped), `failures` (every failed LM call, with its state id) and, with
    retrieval, `retrieved` (every passage seen, first-retrieved first).

    A sub-question already on a state's path, the question itself, or a light rewording of
    either (`same_question`) is not asked again. Ties in confidence go to the state created
    first. A failed call never ends the question: a failed Ask leaves that state without
    children, a failed evidence or Answer call marks the new state "failed" (it never enters
    a beam), and a failed Score leaves the state in the race at confidence 0. When every
    call fails the answer is "" and `failures` says why.
    """

    retrieves = True
    concurrent = True
    fitted_settings = ("path_judge",)
    name = "beam"
    tree_shape = "states"
    presets = PRESETS
    default_preset = "nq"
    annotation_demos = {"ask": "ask", "answer": "read-history", "scorer": "score", "summarize": "summarize"}
    # the one compile measured at n >= 100 (+2 [-5, +9] EM on the reference questions; ties and
    # calibration much better); no LM call to compile
    default_compile = {"optimizer": "path-judge+trained-reader", "train": 100}
    trained_reading = {"reading": "passages"}  # a state's answer read by rta's reader over its passages
    reader = "answer"  # Answer, called for every state; the recorded read is a question's last one
    query_writer = "ask"  # its sub-questions are the searches (with evidence="retrieval"; `--optimizer query`)

    def check_fitted(self, fitted: dict) -> None:
        if fitted.get("path_judge") is not None:
            if self.evidence != "retrieval":
                raise ValueError("a path judge scores passages: it needs evidence='retrieval'")
            check_path_judge(fitted["path_judge"])

    @classmethod
    def needs_retriever(cls, settings) -> bool:
        return settings["evidence"] == "retrieval"

    @classmethod
    def no_query_writer(cls, settings) -> str | None:
        if settings["evidence"] != "retrieval":
            return (f"searches nothing with its sub-questions under evidence={settings['evidence']}; "
                    "only evidence=retrieval does")
        if settings["depth"] == 0:
            return "never asks a sub-question with depth=0"
        return None

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        # evidence_chars: the search without its summary calls, the lever a priced search needs
        return {"threshold": (0.8, 0.9, 1.0), "beam_size": (2, 3), "passages": (2, 3), "evidence_chars": (None, 300)}

    @classmethod
    def call_bound(cls, settings) -> int:
        """Seeds (answer + score, and evidence + answer + score with evidence), then per depth
        every state of the beam asking once and filling K new states (evidence + answer + score):
        the first depth expands every seed (beam 0 is not cut to B), later ones up to B states.
        Evidence written without the LM (`evidence="none"`, `evidence_chars`) costs no call."""
        written = settings["evidence"] != "none" and settings.get("evidence_chars") is None
        per_state, k = 2 + written, settings["max_queries"]
        seeds = 1 if settings["evidence"] == "none" else 2
        total, beam = 2 + (seeds - 1) * per_state, seeds
        for _ in range(settings["depth"]):
            total += beam * (1 + k * per_state)
            beam = min(settings["beam_size"], beam * k)
        return total

    def __init__(self, retriever: Retriever | None = None, *, max_queries: int = 2, depth: int = 2,
                 passages: int = 2, threshold: float = 0.8, beam_size: int = 2, evidence: str = "retrieval",
                 passage_chars: int = 1000, evidence_chars: int | None = None, check_seeds: bool = False,
                 path_judge: dict | None = None,
                 embed_fn: EmbedFn | None = None, threads: int = 1, pick: Literal["beam", "vote"] = "beam",
                 reading: Literal["history", "passages"] = "history"):
        super().__init__()
        if evidence not in EVIDENCE_MODES:
            raise ValueError(f"evidence must be one of {', '.join(EVIDENCE_MODES)}; got {evidence!r}")
        for name, value, low in (("max_queries", max_queries, 1), ("depth", depth, 0), ("passages", passages, 1),
                                 ("beam_size", beam_size, 1), ("passage_chars", passage_chars, 1)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
        if evidence_chars is not None:
            if not isinstance(evidence_chars, int) or isinstance(evidence_chars, bool) or evidence_chars < 1:
                raise ValueError(f"evidence_chars must be None or an integer >= 1; got {evidence_chars!r}")
            if evidence != "retrieval":
                raise ValueError("evidence_chars writes retrieved passages as the evidence: it needs "
                                 "evidence='retrieval'")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie in [0, 1]; got {threshold!r}")
        check_retriever(retriever, "BeamSearchQA with evidence='retrieval'", needed=evidence == "retrieval")
        if path_judge is not None and evidence != "retrieval":
            raise ValueError("a path judge judges retrieved passages: it needs evidence='retrieval'")
        self._keep_judge(path_judge, embed_fn)
        self.max_queries, self.depth, self.passages = max_queries, depth, passages
        self.threshold, self.beam_size, self.evidence = float(threshold), beam_size, evidence
        if pick not in PICKS:
            raise ValueError(f"pick must be one of {', '.join(PICKS)}; got {pick!r}")
        self.passage_chars, self.check_seeds, self.pick = passage_chars, bool(check_seeds), pick
        self.evidence_chars = evidence_chars
        if reading not in READINGS:
            raise ValueError(f"reading must be one of {', '.join(READINGS)}; got {reading!r}")
        if reading == "passages" and evidence != "retrieval":
            raise ValueError("reading='passages' reads the passages behind a state: it needs evidence='retrieval'")
        self.reading = reading
        self.threads = check_threads(threads)
        self._retriever = SharedRef(retriever)
        self.ask = budget.predict(Ask)
        self.answer = budget.predict(AnswerFromPassages if reading == "passages" else Answer)
        if reading == "passages":  # its demos are rta's reads, not histories
            self.annotation_demos = {**type(self).annotation_demos, "answer": "read"}
        self.scorer = budget.predict(Score)  # never `score`: MIPROv2 sets program.score
        if evidence == "retrieval" and evidence_chars is None:
            self.summarize = budget.predict(SummarizeEvidence)
        elif evidence == "genread":
            self.background = budget.predict(GenerateBackground)

    @classmethod
    def preset(cls, name: str, retriever: Retriever | None = None, **overrides) -> BeamSearchQA:
        """The paper's settings for "nq", "triviaqa" or "webq" (Table 6), with any overrides."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls(retriever, **{**PRESETS[name], **overrides})

    @property
    def retriever(self) -> Retriever | None:
        return self._retriever.value

    # --- Algorithm 1 ---------------------------------------------------------------------

    def forward(self, question: str) -> dspy.Prediction:
        question = check_question(question, type(self).__name__)
        search = _Search(question, self._judge())
        stop_at = search.judge.sufficiency.threshold if search.judge is not None else self.threshold
        beam = self._seeds(search)
        beams, stop = [[s.id for s in beam]], "max_depth"
        rounds = self.depth
        if not beam:  # every seed failed: nothing to expand
            rounds, stop = 0, "empty_beam"
        elif self.check_seeds and beam[0].confidence >= stop_at:
            rounds, stop = 0, "threshold"
        beam, stop = self._expand(search, beam, beams, rounds, stop, stop_at)
        return self._prediction(search, beam, beams, stop)

    def _fill(self, search: _Search, state: SearchState) -> None:
        """Evidence for the newest sub-question, then the answer and its score (thread-safe):
        the LM calls of a state registered by `_Search.new_state`."""
        if state.sub_questions and len(state.evidences) < len(state.sub_questions):
            if not self._add_evidence(state, search.question, state.sub_questions[-1]):
                state.status = "failed"
                return
        self._answer_and_score(state, search.question, search.judge, search.behind(state))

    def _fill_all(self, search: _Search, batch: list[SearchState]) -> None:
        """Fill a batch (concurrently with threads), then log its passages in creation order,
        so the retrieved order is the same whatever the threads did."""
        map_calls(lambda state: self._fill(search, state), batch, self.threads)
        for state in batch:
            search.seen.add(state.passages)

    def _seeds(self, search: _Search) -> list[SearchState]:
        """Beam 0 (lines 1-8): the answer without evidence and, unless `evidence="none"` (where
        it would repeat the first), the answer with evidence for the question itself; ranked,
        failed seeds left out."""
        beam = [search.new_state(None, None)]
        if self.evidence != "none":
            beam.append(search.new_state(None, search.question))
        self._fill_all(search, beam)
        for seed in beam:
            emit({"type": "state", "state": seed.to_dict()})
        return rank([s for s in beam if s.status != "failed"])

    def _expand(self, search: _Search, beam: list[SearchState], beams: list[list[int]], rounds: int,
                stop: str, stop_at: float) -> tuple[list[SearchState], str]:
        """Lines 9-25: up to `rounds` depths, each appending its beam's ids to `beams`; the last
        beam and why the search stopped (`stop` when it ran every round)."""
        for _ in range(rounds):
            kept = self._next_depth(search, beam)
            if not kept:  # nothing new to compare: the previous beam stays the last one
                return beam, "no_new_states"
            beam = kept
            beams.append([s.id for s in beam])
            if beam[0].confidence >= stop_at:
                return beam, "threshold"
        return beam, stop

    def _next_depth(self, search: _Search, beam: list[SearchState]) -> list[SearchState]:
        """One depth: every state of `beam` asks, each new sub-question becomes a filled child;
        the B most confident answered children are the new beam (the rest marked pruned); every
        child is emitted once pruning has decided its status. Empty when no child was answered."""
        asked = map_calls(lambda parent: self._ask(parent, search.question), beam, self.threads)
        children = [search.new_state(parent, sq) for parent, sub_questions in zip(beam, asked, strict=True)
                    for sq in sub_questions]
        self._fill_all(search, children)
        answered = rank([c for c in children if c.status != "failed"])
        for pruned in answered[self.beam_size:]:
            pruned.status = "pruned"
        for child in children:
            emit({"type": "state", "state": child.to_dict()})
        return answered[: self.beam_size]

    @staticmethod
    def check_recorded_tree(tree: dict) -> None:
        """Refuse a recorded tree that is not one: states numbered 0, 1, 2, ... in creation order,
        each one's parent an earlier state, a best that is one of them (a cycle in a hostile record
        would otherwise walk forever)."""
        states = tree.get("states") if isinstance(tree, dict) else None
        if not isinstance(states, list) or not states or not all(isinstance(s, dict) for s in states):
            raise ValueError("the recorded tree has no list of states")
        if not isinstance(tree.get("question"), str):
            raise ValueError("the recorded tree names no question")
        for i, values in enumerate(states):
            parent = values.get("parent")
            if type(values.get("id")) is not int or values["id"] != i:
                raise ValueError("the recorded tree's states are not numbered 0, 1, 2, ... in creation order")
            if parent is not None and not (type(parent) is int and 0 <= parent < i):
                raise ValueError(f"the recorded tree's state {i} has parent {repr(parent)[:40]}, not an earlier "
                                 "state: refused")
            if not isinstance(values.get("passages"), list) or not all(
                    isinstance(p, dict) and isinstance(p.get("id"), str) for p in values["passages"]):
                raise ValueError(f"the recorded tree's state {i} has no list of passages")
        best = tree.get("best")
        if best is not None and not (type(best) is int and 0 <= best < len(states)):
            raise ValueError(f"the recorded tree's best state {repr(best)[:40]} is not one of its states")

    def answer_from_tree(self, tree: dict, passages: dict[str, Passage]) -> dspy.Prediction:
        """Read a recorded search again (`treeqa replay`): the recorded best state's answer from
        this program's reader, one call; every state, score and beam as recorded. Exact only where
        no recorded confidence read an answer (a path judge decided every one) and the pick is
        the beam's best; anything else is a ValueError."""
        if self.pick != "beam":
            raise ValueError("pick='vote' reads every state's answer: only a pick='beam' search is read again")
        self.check_recorded_tree(tree)
        states = [_recorded_state(values, passages) for values in tree["states"]]
        unjudged = [s.id for s in states if s.status != "failed" and s.judge_path is None]
        if unjudged:
            raise ValueError(f"states {unjudged[:5]} were scored by Score, which read their answers: "
                             "a new reader could rank them otherwise")
        search = _Search(tree["question"], None)
        search.states = states
        for state in states:
            search.seen.add(state.passages)
        best = states[tree["best"]] if tree.get("best") is not None else None
        if best is not None:
            best.failures = []
            self._read(best, search.question, search.behind(best))
        replayed = {**tree, "settings": self.method_settings,
                    "states": [s.to_dict() if s is best else values for s, values in zip(states, tree["states"],
                                                                                        strict=True)]}
        failures = [{**f, "state": best.id} for f in best.failures] if best is not None else []
        outputs = {"answer": best.answer if best is not None and best.status != "failed" else "",
                   "confidence": best.confidence if best is not None else 0.0, "tree": replayed,
                   "failures": failures, "retrieved": search.seen.passages}
        return dspy.Prediction(**outputs)

    def _prediction(self, search: _Search, beam: list[SearchState], beams: list[list[int]],
                    stop: str) -> dspy.Prediction:
        """The answer (line 26, or the vote with `pick="vote"`), the whole tree, every failure
        and, with retrieval, every passage seen."""
        states = search.states
        best = self._read_best(search, beam)  # line 26
        if self.pick == "vote":
            best = voted(states, prefer=best) or best
        failures = [{**f, "state": s.id} for s in states for f in s.failures]
        tree = {"question": search.question, "settings": self.method_settings,
                "states": [s.to_dict() for s in states], "beams": beams, "best": best.id if best else None,
                "stop": stop}
        outputs = {"answer": best.answer if best else "", "confidence": best.confidence if best else 0.0,
                   "tree": tree, "failures": failures}
        if self.evidence == "retrieval":
            outputs["retrieved"] = search.seen.passages
        return dspy.Prediction(**outputs)

    def _read_best(self, search: _Search, beam: list[SearchState]) -> SearchState | None:
        """The last beam's most confident state that answers (line 26). A state the judge left
        unread is read now; one whose reading fails is marked failed and the next one answers,
        as a state whose answer failed never entered the beam without a judge."""
        for state in beam:
            if state.answer is not None or self._read(state, search.question, search.behind(state)):
                return state
        return None

    # --- the four functions of Section 4 --------------------------------------------------

    def _ask(self, state: SearchState, question: str) -> list[str]:
        """Up to K sub-questions, in the model's order, that are not already on this state's path,
        not the question itself, and not repeated (see `same_question`)."""
        pred = safe_call(self.ask, state.failures, f"state{state.id}.ask", question=question,
                         history=format_history(state.history), max_questions=self.max_queries)
        proposed = [q.strip() for q in pred.sub_questions] if pred is not None else []
        state.asked = proposed
        return self._new_sub_questions(proposed, [question, *state.sub_questions])

    def _new_sub_questions(self, proposed: Iterable[str], taken: list[str]) -> list[str]:
        taken, new = list(taken), []
        for sub_question in proposed:
            if text_key(sub_question) and not any(same_question(sub_question, t) for t in taken):
                taken.append(sub_question)
                new.append(sub_question)
        return new[: self.max_queries]

    # --- what `--optimizer query` compiles Ask against (the contract's query writer) ----------

    def completion_inputs(self, question: str, passages: list[Passage]) -> dict[str, object]:
        """What Ask reads in the state the evidence seed becomes when the question's own search
        found `passages`: the question, and a history of the question with those passages as its
        evidence (each cut to `evidence_chars`, else `passage_chars`, standing in for the summary)."""
        evidence = passages_as_evidence(passages, self.evidence_chars or self.passage_chars)
        return {"question": question, "history": format_history([(question, evidence)]),
                "max_questions": self.max_queries}

    def completion_queries(self, prediction: dspy.Prediction | None, question: str) -> list[str]:
        """The searches Ask's reply makes from that state: its sub-questions as `_ask` keeps them."""
        proposed = [str(q).strip() for q in prediction.sub_questions] if prediction is not None else []
        return self._new_sub_questions(proposed, [question, question])

    @property
    def expansion_width(self) -> int:
        return self.passages

    def search_below(self, run, query: str, path, width: int, where: str) -> list[Passage]:
        """The `width` passages a new state's search with sub-question `query` reads; the beam does
        not skip passages already behind the state (`path` is unused); a failure is recorded."""
        return self._search(run.failures, query, width, where) or []

    def _search(self, failures: list[dict], query: str, k: int, where: str) -> list[Passage] | None:
        """The `k` passages for `query`; None, with the failure recorded, when the search failed."""
        try:
            return list(self.retriever.search(query, k))
        except Exception as exc:  # noqa: BLE001 - a failed search fails this state (or compile reply) only
            record_failure(failures, where, exc)
            return None

    def _add_evidence(self, state: SearchState, question: str, sub_question: str) -> bool:
        """Append the evidence for `sub_question` to the state; False, with the failure recorded
        and an empty evidence appended, when the search or the LM call failed. Passages are retrieved for
        the sub-question and summarised for the question."""
        text: str | None = ""
        if self.evidence == "genread":
            pred = safe_call(self.background, state.failures, f"state{state.id}.background", question=sub_question)
            text = pred.document.strip() if pred is not None else None
        elif self.evidence == "retrieval":
            passages = self._search(state.failures, sub_question, self.passages, f"state{state.id}.retrieve")
            text = NO_PASSAGES if passages is not None else None
            state.passages = passages = passages or []
            if passages and self.evidence_chars is not None:
                text = passages_as_evidence(passages, self.evidence_chars)
            elif passages:
                pred = safe_call(self.summarize, state.failures, f"state{state.id}.summarize", question=question,
                                 passages=format_passages(passages, self.passage_chars))
                text = pred.evidence.strip() if pred is not None else None
        state.evidences.append(text or "")
        return text is not None

    def _read(self, state: SearchState, question: str, behind: list[Passage]) -> bool:
        """The state's answer, read from its history or (`reading="passages"`) from the distinct
        passages behind it; False, the state marked failed, when the call failed."""
        if self.reading == "passages":
            distinct = list({p.id: p for p in behind}.values())
            inputs = {"passages": format_passages(distinct, self.passage_chars)}
        else:
            inputs = {"history": format_history(state.history)}
        pred = safe_call(self.answer, state.failures, f"state{state.id}.answer", question=question, **inputs)
        if pred is None:
            state.status = "failed"
            return False
        state.answer = clean_answer(pred.answer)
        return True

    def _answer_and_score(self, state: SearchState, question: str, judge: PathJudge | None = None,
                          passages: list[Passage] | None = None) -> None:
        """Answer (`_read`), then score it (with a judge: judge the passages behind it); a failed
        score leaves confidence 0. A judge ranks by passages, never by answers, so with
        `pick="beam"` the judged state is left unread (`_read_best` reads the one that answers);
        where the judge fails, Score decides and reads the answer first."""
        unread = judge is not None and self.pick == "beam"
        if not unread and not self._read(state, question, passages or []):
            return
        if judge is not None:
            try:
                probability, path = judge.best_path(question, passages or [], self.judge_embed_fn())
            except Exception as exc:  # noqa: BLE001 - without the encoder, Score decides for this state
                record_failure(state.failures, f"state{state.id}.judge", exc)
            else:
                state.confidence, state.judge_path = round(probability, 4), [p.id for p in path]
                state.answer = None if unread else state.answer
                return
            if unread and not self._read(state, question, passages or []):
                return
        pred = safe_call(self.scorer, state.failures, f"state{state.id}.score", question=question,
                         history=format_history(state.history), answer=state.answer)
        state.confidence = float(pred.confidence) if pred is not None else 0.0
