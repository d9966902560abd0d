"""The reader's training set: every question we may train on, read the way RAFT builds reads,
in the exact prompt of the predictor being trained.

Why: the first adapters saw 275 reads of ~250 questions and their loss did not fall. This set
takes every question that is neither a claim sample nor unknown to the data (about 1,150), and
gives each several reads at the reader's passage budget:
- "own": the program's own retrieval, where it already holds every gold paragraph;
- "gold": the gold paragraphs (or gold sentences, for questions that come without paragraphs)
  among the retrieval's best distractors, shuffled;
- "partial": one gold paragraph left out, so the reader learns to answer from what is there;
- "missed" (with a `mix`): the program's own retrieval as it is where it misses a gold paragraph,
  RAFT's reads without the oracle, which is what the reader meets most often at test time.
A question whose gold is sentences (the evidence questions) gets neither own nor missed reads:
its paragraphs are not in the corpus, so its retrieval always "misses" and would only teach guessing.
Its distractors are sentences too, one from each of the retrieval's best paragraphs, untitled like
the gold: shown beside titled paragraphs, the gold was the only untitled text in 469 of v4's 1,073
reads, an answer found by its form (benchmarks/runs/reader-v5/NOTES.md).
With a `mix` (weights by kind), each question's reads are also put in a seeded weighted order
(`pick`), so that training on one read a question draws the kinds in those shares: the reader set
v1 trained on its gold reads only and its adapter read gold better (+9.6 EM) and rta's own
retrieval no better (benchmarks/runs/lora-reader-rta-v1/NOTES.md).
The target is the gold answer as the data writes it. Questions are split into train and
validation by a hash of their id (a rebuild never moves one), every choice is seeded per
question (a question's reads do not depend on which others are in the set), yes/no answers are
balanced on the train side (by question where one read a question is drawn), and the manifest
records the reads file's sha256.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import dspy

from treeqa.data.answers import normalize_answer
from treeqa.data.corpus import Passage
from treeqa.data.loaders import DataError, data_dir, load_examples
from treeqa.data.passage import clean_whitespace, split_sentences
from treeqa.lm import TrainableJSONAdapter
from treeqa.programs.baselines import RetrieveThenAnswer
from treeqa.retrievers import get_retriever
from treeqa.signatures.formatting import format_passages
from treeqa.teleprompt.recorded import reader_of

# The samples our figures are claimed on (dataset, split, skip, n in the seed-0 order): no read
# may come from them. Anything added here is refused from then on.
CLAIM_SAMPLES: tuple[tuple[str, str, int, int], ...] = (
    ("hotpotqa", "dev", 100, 197),
    ("2wikimultihopqa", "dev", 50, 100),
    ("2wikimultihopqa", "train", 150, 200),
    ("musique", "dev", 0, 100),
)

EVIDENCE_FILE = "hotpotqa/hotpot_train_evidence_500.jsonl"
OFFICIAL_TRAIN_FILE = "hotpotqa/hotpot_train_v1.1.json"  # `treeqa data get hotpotqa` fetches it
# the evidence questions' ids (a hash of their words), in EVIDENCE_FILE's order: what finds them in
# the official train file where ours is absent
EVIDENCE_IDS = Path(__file__).parent / "evidence-questions.txt"


@dataclass(frozen=True)
class Take:
    """Questions of one split: positions [skip, skip + n) of the seed-0 order, minus `without`
    (positions), or a file of evidence questions (`split="evidence"`)."""

    dataset: str
    split: str
    n: int | None = None
    skip: int = 0
    without: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return f"{self.dataset}:{self.split}"


# Every question the reader may learn from (issue: ~1,100): HotpotQA train and its 500 evidence
# questions, the 100 reference dev questions examined while designing; 2Wiki train outside its
# claim sample and its 50 reference dev questions; MuSiQue train.
TAKES: tuple[Take, ...] = (
    Take("hotpotqa", "train"),
    Take("hotpotqa", "evidence"),
    Take("hotpotqa", "dev", n=100),
    Take("2wikimultihopqa", "train", without=(150, 350)),
    Take("2wikimultihopqa", "dev", n=50),
    Take("musique", "train"),
)


def evidence_examples(path: Path) -> list[dspy.Example]:
    """HotpotQA train questions that come with their gold sentences only (no titles, no ids):
    the id is a hash of the question, the gold passages are the sentences."""
    examples = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            question, answer, evidence = rec["question"], str(rec["answer"]), list(rec["evidence"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path}:{i}: not an evidence record ({exc})") from None
        examples.append(_evidence_example(question, answer, evidence, rec.get("type")))
    return examples


def _evidence_id(question: str) -> str:
    return "hotpotqa-evidence-" + hashlib.sha1(question.encode()).hexdigest()[:12]


def _evidence_example(question: str, answer: str, evidence: Sequence, kind: str | None) -> dspy.Example:
    sentences = [clean_whitespace(s) for s in map(str, evidence) if clean_whitespace(s)]
    return dspy.Example(id=_evidence_id(question), question=question, answers=[answer], gold_sentences=sentences,
                        type=kind).with_inputs("question")


def official_evidence_examples(path: Path, ids_file: Path | None = None) -> list[dspy.Example]:
    """The evidence questions rebuilt from HotpotQA's official train file, for a data folder without
    our 500-question file: the same questions (found by the hash of their words), each with its
    supporting sentences in the order its facts list them. Reads built from them may differ from
    the released reader's if the two files word a sentence differently (the record says so)."""
    ids_file = ids_file or EVIDENCE_IDS
    wanted = [f"hotpotqa-evidence-{line.strip()}" for line in ids_file.read_text().splitlines() if line.strip()]
    keep, found = set(wanted), {}
    try:
        records = json.loads(path.read_bytes())
        for rec in records:
            qid = _evidence_id(rec["question"])
            if qid not in keep or qid in found:
                continue
            context = {title: sentences for title, sentences in rec["context"]}
            evidence = [context[t][i] for t, i in rec["supporting_facts"]
                        if t in context and isinstance(i, int) and 0 <= i < len(context[t])]
            found[qid] = _evidence_example(rec["question"], str(rec["answer"]), evidence, rec.get("type"))
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not HotpotQA's official train file ({type(exc).__name__}: {exc})") from None
    if missing := [qid for qid in wanted if qid not in found]:
        raise DataError(f"{path}: {len(missing)} of the {len(wanted)} evidence questions are not in it "
                        f"(e.g. {missing[0]}); is it hotpot_train_v1.1.json?")
    return [found[qid] for qid in wanted]


def take_examples(take: Take) -> list[dspy.Example]:
    if take.split == "evidence":
        root = data_dir()
        if root is not None and (root / EVIDENCE_FILE).is_file():
            return evidence_examples(root / EVIDENCE_FILE)
        if root is not None and (root / OFFICIAL_TRAIN_FILE).is_file():
            return official_evidence_examples(root / OFFICIAL_TRAIN_FILE)
        raise DataError(f"{take.dataset} evidence questions: expected {EVIDENCE_FILE}, or the official "
                        f"{OFFICIAL_TRAIN_FILE} (treeqa data get hotpotqa), in the data folder")
    examples = load_examples(take.dataset, take.split, n=take.n, skip=take.skip)
    if take.without is not None:
        start, stop = take.without
        examples = [ex for i, ex in enumerate(examples, start=take.skip) if not start <= i < stop]
    return examples


def claim_keys(claims: Iterable[tuple[str, str, int, int]] = CLAIM_SAMPLES) -> tuple[set[str], set[str]]:
    """The ids and the normalised question texts of every claim sample."""
    ids, texts = set(), set()
    for dataset, split, skip, n in claims:
        for example in load_examples(dataset, split, n=n, skip=skip):
            ids.add(example.id)
            texts.add(normalize_answer(example.question))
    return ids, texts


def refuse_claimed(examples: Sequence[dspy.Example], ids: set[str], texts: set[str]) -> None:
    """A training question that is a claim sample's (by id or by its words) is an error, never a
    silent drop: it means a take or a sample was written wrong."""
    bad = [ex.id for ex in examples if ex.id in ids or normalize_answer(ex.question) in texts]
    if bad:
        raise ValueError(f"{len(bad)} training question(s) belong to a claim sample, e.g. {bad[:3]}")


def is_validation(question_id: str, share: float) -> bool:
    """Held out for validation: decided by the id's hash alone, so a rebuild keeps the split."""
    return int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


@dataclass(frozen=True)
class Read:
    """One training read: what the reader is shown and what it should answer."""

    question_id: str
    dataset: str
    kind: str
    question: str
    passages: tuple[str, ...]
    answer: str
    pick: int | None = None

    @property
    def id(self) -> str:
        return f"{self.question_id}:{self.kind}"


def _gold_of(example: dspy.Example, by_id: dict[str, Passage]) -> list[Passage]:
    if example.get("gold_sentences"):
        return [Passage(id="sent-" + hashlib.sha1(s.encode()).hexdigest()[:12], title="", text=s)
                for s in example.gold_sentences]
    return [by_id[i] for i in example.get("gold_ids") or [] if i in by_id]


def _as_texts(passages: Sequence[Passage], chars: int) -> tuple[str, ...]:
    """As the reader sees them; a gold sentence with no title is shown as its text."""
    shown = format_passages(passages, chars)
    return tuple(p.text if not p.title else text for p, text in zip(passages, shown, strict=True))


KINDS = ("own", "missed", "gold", "partial")
EVIDENCE_DISTRACTORS = ("sentences", "paragraphs")
MIN_TEMPLATE_QUESTIONS = 10  # a yes/no template balanced on its own (`balanced`, by_template)
MIN_SENTENCE_CHARS = 25  # shorter pieces are mostly a split abbreviation ("J.", "St.")


def sentence_distractors(paragraphs: Sequence[Passage], rng: random.Random) -> list[Passage]:
    """One untitled sentence of each paragraph, drawn by `rng`: distractors in the gold sentences'
    form. A paragraph with no sentence of MIN_SENTENCE_CHARS gives its whole text."""
    out = []
    for p in paragraphs:
        pieces = [s for s in split_sentences(p.text) if len(s) >= MIN_SENTENCE_CHARS] or [p.text]
        i = rng.randrange(len(pieces))
        out.append(Passage(id=f"{p.id}:s{i}", title="", text=pieces[i]))
    return out


def parse_mix(text: str) -> dict[str, float]:
    """'own=0.4,gold=0.4,...' as weights by kind; an unknown kind, a bad or negative weight, or no
    positive weight is an error."""
    mix = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, weight = part.partition("=")
        kind = kind.strip()
        if kind not in KINDS:
            raise ValueError(f"{kind!r} is not a read kind ({', '.join(KINDS)})")
        try:
            mix[kind] = float(weight)
        except ValueError:
            raise ValueError(f"{part!r}: expected KIND=WEIGHT") from None
        if mix[kind] < 0:
            raise ValueError(f"{part!r}: a weight cannot be negative")
    if not any(w > 0 for w in mix.values()):
        raise ValueError(f"{text!r}: no kind has a positive weight")
    return mix


def picked(reads: Sequence[Read], mix: dict[str, float], rng: random.Random) -> list[Read]:
    """The reads with their `pick`: a weighted order without replacement (each read's key is
    u ** (1 / weight), highest first), so the first read of a question is of kind K with
    probability proportional to mix[K] among the kinds it has; a kind weighted 0 comes last."""
    keys = [rng.random() ** (1 / mix[r.kind]) if mix.get(r.kind, 0) > 0 else -1.0 - i for i, r in enumerate(reads)]
    order = sorted(range(len(reads)), key=lambda i: -keys[i])
    ranks = {i: rank for rank, i in enumerate(order)}
    return [replace(r, pick=ranks[i]) for i, r in enumerate(reads)]


def reads_of(example: dspy.Example, dataset: str, retrieved: Sequence[Passage], gold: Sequence[Passage], *,
             k: int, chars: int, seed: int, partial_share: float, mix: dict[str, float] | None = None,
             evidence_distractors: str = "sentences") -> list[Read]:
    """A question's reads (see the module doc); none when it has no gold or no answer.
    `evidence_distractors="paragraphs"` shows a gold of sentences among titled paragraphs, as
    sets before v5 did."""
    if not gold or not example.get("answers"):
        return []
    rng = random.Random(f"{seed}:{example.id}")
    answer = str(example.answers[0])
    gold = list(gold)[:k]
    gold_ids = {p.id for p in gold}
    gold_texts = [p.text for p in gold]
    distractors = [p for p in retrieved if p.id not in gold_ids and not any(t in p.text for t in gold_texts)]
    if example.get("gold_sentences") and evidence_distractors == "sentences":
        distractors = sentence_distractors(distractors[:k], random.Random(f"{seed}:{example.id}:sentences"))

    def read(kind: str, passages: list[Passage]) -> Read:
        return Read(example.id, dataset, kind, example.question, _as_texts(passages, chars), answer)

    out = []
    own = list(retrieved[:k])
    if example.get("gold_sentences"):
        pass  # its gold is sentences outside the corpus: its own retrieval can neither hold nor miss them
    elif {p.id for p in own} >= gold_ids:
        out.append(read("own", own))
    elif mix is not None:
        out.append(read("missed", own))
    shown = gold + distractors[: k - len(gold)]
    rng.shuffle(shown)
    out.append(read("gold", shown))
    if len(gold) > 1 and rng.random() < partial_share:
        left_out = rng.randrange(len(gold))
        kept = [p for i, p in enumerate(gold) if i != left_out]
        shown = kept + distractors[: k - len(kept)]
        rng.shuffle(shown)
        out.append(read("partial", shown))
    if mix is not None:
        out = picked(out, mix, random.Random(f"{seed}:{example.id}:pick"))
    return out


def answer_class(answer: str) -> str:
    norm = normalize_answer(answer)
    return norm if norm in ("yes", "no") else "other"


def balance_yes_no(reads: Sequence, seed: int = 0, answer_of: Callable = lambda r: r.answer) -> tuple[list, int]:
    """The reads with as many "yes" as "no" targets: surplus reads of the more frequent one are
    left out (seeded), the rest keep their order. A reader trained on 35 "no" against 10 "yes"
    answered "no" to 24 of 26 unseen yes/no questions (benchmarks/runs/lora-reader-rta/NOTES.md)."""
    yes = [i for i, r in enumerate(reads) if answer_class(answer_of(r)) == "yes"]
    no = [i for i, r in enumerate(reads) if answer_class(answer_of(r)) == "no"]
    larger, smaller = (yes, no) if len(yes) > len(no) else (no, yes)
    dropped = set(random.Random(seed).sample(larger, len(larger) - len(smaller)))
    return [r for i, r in enumerate(reads) if i not in dropped], len(dropped)


def question_template(question: str) -> str:
    """A yes/no question's template: its last three words when none is a name ("...of the same
    nationality?", "...in the same country?"), else "other". 2Wiki's comparisons come in a handful
    of such templates, each with its own share of "yes": balanced over the whole dataset, v4's
    reads taught "same nationality?" as "no" 8 times in 11, and the adapter said "no" to 7 of the 8
    yes/no claim questions, all "yes" (benchmarks/runs/reader-v5/NOTES.md)."""
    words = re.findall(r"[A-Za-z][\w'-]*", question)
    tail = words[-3:]
    if len(tail) < 3 or any(w[0].isupper() for w in tail):
        return "other"
    return " ".join(w.lower() for w in tail)


def balanced(train: list[Read], seed: int, *, by_question: bool, apart: bool,
             by_template: bool = False) -> tuple[list[Read], int]:
    """The train reads with yes/no balanced, and how many were left out. `by_question` (a set with
    a mix, trained one read a question) keeps or drops a question with all its reads, so the draw
    stays balanced. `apart` balances each dataset on its own and, by question, the questions whose
    first read is the program's own retrieval apart from those whose first read was built: balanced
    over the whole set, v2's adapter answered "no" to 16 of 18 HotpotQA yes/no questions (11 are
    "yes") and to 8 of 8 2Wiki ones (all "yes"), and v2's own-retrieval reads were 13 "no" to 9
    "yes" (benchmarks/runs/reader-v3/NOTES.md). `by_template` (with `apart`) also balances each
    question template (`question_template`) on its own, so no template teaches an answer."""
    units: dict[str | int, list[Read]] = {}
    for i, r in enumerate(train):
        units.setdefault(r.question_id if by_question else i, []).append(r)
    # a template of a handful of questions is balanced with its dataset's others: on its own, a
    # one-sided template would lose every question (HotpotQA's yes/no questions are mostly unique)
    common = Counter((reads[0].dataset, question_template(reads[0].question)) for reads in units.values()
                     if answer_class(reads[0].answer) != "other")

    def part_of(reads: list[Read]) -> tuple:
        if not apart:
            return ()
        first = min(reads, key=lambda r: r.pick if r.pick is not None else 0)
        template = question_template(first.question)
        kept = template if common[(first.dataset, template)] >= MIN_TEMPLATE_QUESTIONS else "other"
        side = (first.dataset, first.kind in ("own", "missed")) if by_question else (first.dataset,)
        return side + ((kept,) if by_template else ())

    parts: dict[tuple, list[list[Read]]] = {}
    for reads in units.values():
        parts.setdefault(part_of(reads), []).append(reads)
    kept, dropped = [], 0
    for unit_lists in parts.values():
        unit_kept, left_out = balance_yes_no(unit_lists, seed, answer_of=lambda reads: reads[0].answer)
        kept += [r for reads in unit_kept for r in reads]
        dropped += left_out
    return kept, dropped


def chat_of(read: Read, reader: dspy.Predict, adapter: dspy.Adapter) -> dict:
    """The read as the reader's exact prompt, with the gold answer as the assistant's reply."""
    inputs = {"question": read.question, "passages": list(read.passages)}
    return adapter.format_finetune_data(reader.signature, reader.demos, inputs, {"answer": read.answer})


@dataclass
class ReaderSet:
    """The built set: train and validation reads, and what was counted on the way."""

    train: list[Read]
    validation: list[Read]
    counts: dict


def build_reads(groups: Sequence[tuple[str, Sequence[dspy.Example]]],
                search_for: Callable[[str], Callable[[str, int], list[Passage]]],
                corpus_for: Callable[[str], dict[str, Passage]], *, k: int = 5, chars: int = 1000,
                seed: int = 0, partial_share: float = 0.4, validation_share: float = 0.1,
                depth: int = 20, mix: dict[str, float] | None = None, yes_no_by_dataset: bool = False,
                yes_no_by_template: bool = False, evidence_distractors: str = "sentences") -> ReaderSet:
    """Reads for every example of `groups` ((dataset, examples) pairs). `search_for(dataset)`
    returns the program's search (query, n) -> passages, `corpus_for(dataset)` the pooled corpus
    by id; the retrieval's `depth` best passages supply the distractors. `yes_no_by_dataset` and
    `yes_no_by_template` (which implies it): see `balanced`; `evidence_distractors`: see `reads_of`."""
    if evidence_distractors not in EVIDENCE_DISTRACTORS:
        raise ValueError(f"evidence_distractors must be one of {', '.join(EVIDENCE_DISTRACTORS)}, "
                         f"got {evidence_distractors!r}")
    train, validation = [], []
    counts: Counter = Counter()
    for dataset, examples in groups:
        search, by_id = search_for(dataset), corpus_for(dataset)
        for example in examples:
            gold = _gold_of(example, by_id)
            made = reads_of(example, dataset, search(example.question, depth), gold, k=k, chars=chars,
                            seed=seed, partial_share=partial_share, mix=mix,
                            evidence_distractors=evidence_distractors)
            counts["questions"] += 1
            counts["questions_with_gold" if made else "questions_without_gold"] += 1
            side = validation if is_validation(example.id, validation_share) else train
            side.extend(made)
            for r in made:
                counts[f"reads_{r.kind}"] += 1
    train, dropped = balanced(train, seed, by_question=mix is not None, apart=yes_no_by_dataset or yes_no_by_template,
                              by_template=yes_no_by_template)
    counts.update({"train_reads": len(train), "validation_reads": len(validation), "balance_dropped": dropped,
                   "train_questions": len({r.question_id for r in train}),
                   "validation_questions": len({r.question_id for r in validation})})
    return ReaderSet(train, validation, dict(counts))


def write_set(built: ReaderSet, out: Path, reader: dspy.Predict, adapter: dspy.Adapter, settings: dict) -> dict:
    """reads.jsonl (one line a read: its side, kind, inputs, target and chat) and manifest.json
    (settings, counts, the reads file's sha256); returns the manifest."""
    rows = []
    for side, reads in (("train", built.train), ("validation", built.validation)):
        for r in reads:
            row = {"id": r.id, "question_id": r.question_id, "dataset": r.dataset, "side": side,
                   "kind": r.kind, "question": r.question, "passages": list(r.passages),
                   "answer": r.answer, "chat": chat_of(r, reader, adapter)}
            rows.append(row if r.pick is None else row | {"pick": r.pick})
    return write_rows(rows, out, settings, built.counts)


def write_rows(rows: Sequence[dict], out: Path, settings: dict, counts: dict) -> dict:
    """Write a set's rows (each with its id, question_id, side, kind, answer and chat) as
    reads.jsonl, and manifest.json with the settings, counts and the file's sha256."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows]
    data = ("\n".join(lines) + "\n").encode()
    tmp = out / "reads.jsonl.tmp"
    tmp.write_bytes(data)
    tmp.replace(out / "reads.jsonl")
    manifest = {"settings": settings, "counts": counts, "reads_sha256": hashlib.sha256(data).hexdigest()}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def records_by_id(path: Path) -> dict[str, dict]:
    """Id -> record of a resumable JSONL file beside a set (scores, reasons); a torn line (a killed
    run mid-write) is left out, so the rerun redoes that read."""
    if not path.is_file():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            found[rec["id"]] = rec
        except (ValueError, KeyError, TypeError):
            continue
    return found


def hashed_order(reads: Sequence[dict]) -> list[dict]:
    """The reads in a fixed order unrelated to the set's (by a hash of each read's id), so that the
    first N of them are a fair sample of every dataset and kind, and a larger N keeps the first N
    (`train reasons --limit`, `train lora --limit`)."""
    return sorted(reads, key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())


def read_set(path: Path, side: str | None = None, per_question: int | None = None,
             yes_no_built: bool = False) -> list[dict]:
    """The reads of a built set (one side, or both), in file order; `per_question` keeps at most
    that many reads a question: the first of each question's `pick` order where the set was built
    with a mix, else gold, then own, then partial reads. `yes_no_built` also keeps every built read
    (gold, partial) of a yes/no question: at one read a question v3 met 82 yes/no reads in 973, and
    the last 317 of them swung 7 of HotpotQA's 18 yes/no answers (benchmarks/runs/
    lora-reader-rta-v3-full/NOTES.md); built reads come one of each kind a question, so they keep
    "yes" and "no" as balanced as the questions are."""
    folder = Path(path)
    file = folder / "reads.jsonl" if folder.is_dir() else folder
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no reader set here; build one with `treeqa train reads --out {folder}`")
    data = file.read_bytes()
    check_against_manifest(file, data)
    reads = []
    for i, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        try:
            rec = json.loads(line)
            rec["chat"]["messages"]  # noqa: B018 - a read without a chat is torn
        except (ValueError, KeyError, TypeError):
            raise DataError(f"{file}:{i}: not a read (rebuild the set with `treeqa train reads`)") from None
        if side is None or rec["side"] == side:
            reads.append(rec)
    if per_question is None:
        return reads
    rank = {"gold": 0, "own": 1, "partial": 2}
    taken: dict[str, list[dict]] = {}
    for rec in sorted(reads, key=lambda r: r["pick"] if "pick" in r else rank.get(r["kind"], 3)):
        taken.setdefault(rec["question_id"], []).append(rec)
    keep = {rec["id"] for recs in taken.values() for rec in recs[:per_question]}
    if yes_no_built:
        keep |= {rec["id"] for rec in reads
                 if rec["kind"] in ("gold", "partial") and answer_class(rec.get("answer", "")) != "other"}
    return [rec for rec in reads if rec["id"] in keep]


def check_against_manifest(file: Path, data: bytes) -> None:
    """A set's reads are the ones its manifest hashed: a reads.jsonl edited (or torn) since it was
    built would train or score on what no manifest describes."""
    manifest = file.parent / "manifest.json"
    if not manifest.is_file():
        return
    try:
        wanted = json.loads(manifest.read_text(encoding="utf-8")).get("reads_sha256")
    except (ValueError, AttributeError, UnicodeDecodeError):
        raise DataError(f"{manifest}: not a reader set's manifest (rebuild the set with "
                        "`treeqa train reads`)") from None
    if wanted and hashlib.sha256(data).hexdigest() != wanted:
        raise DataError(f"{file} is not the file {manifest} hashed (edited or torn since it was built): rebuild the "
                        "set with `treeqa train reads`")


def build_reader_set(out: Path, *, takes: Sequence[Take] = TAKES, k: int = 5, chars: int = 1000, seed: int = 0,
                     partial_share: float = 0.4, validation_share: float = 0.1, limit: int | None = None,
                     retriever_kind: str = "dense", mix: dict[str, float] | None = None,
                     yes_no_by_dataset: bool = False, yes_no_by_template: bool = False,
                     evidence_distractors: str = "sentences") -> dict:
    """Build the set from the data (the one command behind `treeqa train reads`)."""
    ids, texts = claim_keys()
    groups = []
    for take in takes:
        examples = take_examples(take)[:limit]
        refuse_claimed(examples, ids, texts)
        groups.append((take.dataset, examples))
    retrievers: dict = {}

    def retriever(dataset: str):
        if dataset not in retrievers:
            retrievers[dataset] = get_retriever(dataset, kind=retriever_kind)
        return retrievers[dataset]

    built = build_reads(groups, lambda d: retriever(d).search, lambda d: {p.id: p for p in retriever(d).passages},
                        k=k, chars=chars, seed=seed, partial_share=partial_share, validation_share=validation_share,
                        mix=mix, yes_no_by_dataset=yes_no_by_dataset, yes_no_by_template=yes_no_by_template,
                        evidence_distractors=evidence_distractors)
    program = RetrieveThenAnswer(retriever(takes[0].dataset), k=k, passage_chars=chars)
    _, reader = reader_of(program)
    settings = set_settings(takes=takes, k=k, chars=chars, seed=seed, partial_share=partial_share,
                            validation_share=validation_share, limit=limit, retriever_kind=retriever_kind, mix=mix,
                            yes_no_by_dataset=yes_no_by_dataset, yes_no_by_template=yes_no_by_template,
                            evidence_distractors=evidence_distractors)
    return write_set(built, Path(out), reader, TrainableJSONAdapter(), settings)


def set_settings(*, takes: Sequence[Take] = TAKES, k: int = 5, chars: int = 1000, seed: int = 0,
                 partial_share: float = 0.4, validation_share: float = 0.1, limit: int | None = None,
                 retriever_kind: str = "dense", mix: dict[str, float] | None = None, yes_no_by_dataset: bool = False,
                 yes_no_by_template: bool = False, evidence_distractors: str = "sentences") -> dict:
    """The manifest's settings of a set `build_reader_set` builds with these arguments, without
    building it: what a released reader's record is compared with."""
    settings = {"takes": [vars(t) | {"without": list(t.without) if t.without else None} for t in takes],
                "k": k, "passage_chars": chars, "seed": seed, "partial_share": partial_share,
                "validation_share": validation_share, "limit": limit, "retriever": retriever_kind,
                "reader": f"{RetrieveThenAnswer.name}.{RetrieveThenAnswer.reader}",
                "claim_samples": [list(c) for c in CLAIM_SAMPLES]}
    if mix is not None:  # absent from sets built before mixes, so they rebuild byte for byte
        settings["mix"] = mix
    if yes_no_by_dataset:  # likewise
        settings["yes_no_by_dataset"] = True
    if yes_no_by_template:  # likewise
        settings["yes_no_by_template"] = True
    if evidence_distractors != "paragraphs":  # likewise: every set before v5 showed paragraphs
        settings["evidence_distractors"] = evidence_distractors
    return settings
