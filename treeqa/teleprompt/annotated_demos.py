"""Demos for every inner predictor, built from the training annotations without LM calls.

Bootstrapping keeps only the model's own successful traces, and a 1.5B model rarely makes
one that searches; labeled demos of a raw example fill only the outer signature. The
multi-hop training sets say more: which paragraphs support the answer (HotpotQA / 2Wiki
`supporting_facts`, MuSiQue `is_supporting`), which sentences, and for MuSiQue how the
question decomposes. `AnnotatedFewShot` turns that into demos for each predictor the program
declares in `annotation_demos` (predictor -> kind; an undeclared predictor gets none), by kind:

- "review" (ParagraphReview, ReviewWithReasoning): one gold paragraph of a multi-hop
  question -> relevant, not sufficient, search, with the missing paragraph's title as the
  query; the whole gold path -> accept, with the answer; a distractor -> reject;
- "complete", the missing-paragraph completion (MPC): the first gold paragraph -> the supporting
  sentences of the next one;
- "read" (a reader of evidence, analyses, paragraphs or passages, whichever its signature
  takes) and "read-history" (a reader of an ALLIES history): gold evidence -> the gold answer;
- "ask" (Ask): MuSiQue's decomposition (the first sub-question; then, with it answered, the next);
- "summarize" (SummarizeEvidence): gold and distractor passages -> the gold supporting sentences;
- "score" (Score): the gold evidence with the gold answer -> 0.9, with another question's answer -> 0.1;
- "background" (GenerateBackground): the question -> the gold supporting sentences.

Demos are seeded and at most `k` per predictor (3, as in the papers' prompts), taken from
different training questions; they are saved in `compiled.json` like any other demos.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import dspy
from dspy.teleprompt import Teleprompter

from treeqa.data.passage import Passage, passage_id
from treeqa.signatures.formatting import format_history
from treeqa.signatures.fusion import Evidence, format_evidence
from treeqa.teleprompt.base import Compiler, register

DEFAULT_K = 3
PASSAGE_CHARS = 600  # demos show paragraphs shorter than live calls: three demos must fit the window


def as_passage(paragraph: dict) -> Passage:
    return Passage(passage_id(paragraph["title"], paragraph["text"]), paragraph["title"], paragraph["text"])


def _texts(paragraphs: Sequence[dict]) -> list[str]:
    return [as_passage(p).as_text(PASSAGE_CHARS) for p in paragraphs]


def _facts(paragraphs: Sequence[dict]) -> str:
    return " ".join(f for p in paragraphs for f in p.get("facts") or [p["text"]])


def usable(example: dspy.Example) -> bool:
    """Whether a training question has the annotations demos are built from (two or more gold paragraphs)."""
    annotation = example.get("annotation") or {}
    return len(annotation.get("gold") or []) >= 2


def _answer_sentence(example: dspy.Example) -> str:
    return f"The paragraphs show that the answer is {example.answers[0]}."


# --- one builder per kind of predictor: (example, rng, other answers) -> demo or None ---------

def _review(example, rng, others, reasoning: bool) -> list[dict]:
    gold, distractors = example.annotation["gold"], example.annotation["distractors"]
    first, missing = gold[0], gold[1]
    demos = [
        {"question": example.question, "paragraphs": _texts([first]), "relevant": True, "sufficient": False,
         "action": "search", "next_query": missing["title"], "analysis": "",
         "reasoning": f"The paragraph gives: {_facts([first])} Still missing: what {missing['title']} adds."},
        {"question": example.question, "paragraphs": _texts(gold), "relevant": True, "sufficient": True,
         "action": "accept", "next_query": "", "analysis": _answer_sentence(example),
         "reasoning": f"Together the paragraphs give: {_facts(gold)} Nothing is missing."},
    ]
    if distractors:
        d = rng.choice(distractors)
        demos.append({"question": example.question, "paragraphs": _texts([d]), "relevant": False,
                      "sufficient": False, "action": "reject", "next_query": "", "analysis": "",
                      "reasoning": f"The paragraph is about {d['title']}, which the question does not need."})
    if not reasoning:
        for demo in demos:
            del demo["reasoning"]
    return demos


def _complete(example, rng, others) -> list[dict]:
    gold = example.annotation["gold"]
    return [{"question": example.question, "paragraphs": _texts(gold[:1]), "missing_paragraph": _facts(gold[1:2])}]


def _fuse(input_name: str) -> Callable:
    def build(example, rng, others) -> list[dict]:
        gold = example.annotation["gold"]
        if input_name == "evidence":
            value = [format_evidence(Evidence(tuple(as_passage(p) for p in gold), _answer_sentence(example)),
                                     PASSAGE_CHARS)]
        elif input_name == "analyses":
            value = [_answer_sentence(example)]
        else:
            value = _texts(gold)
        return [{"question": example.question, input_name: value, "answer": example.answers[0]}]
    return build


def _history_answer(example, rng, others) -> list[dict]:
    gold = example.annotation["gold"]
    history = format_history([(example.question, _facts(gold))])
    return [{"question": example.question, "history": history, "answer": example.answers[0]}]


def as_question(step: str) -> str:
    """A MuSiQue sub-question as Ask should write one. MuSiQue writes many hops as a knowledge-base
    relation ("Hello Love >> performer": 97 of the 237 steps of its 100 train questions), which
    would teach Ask to write relations, not questions; those become "What is the performer of
    Hello Love?"."""
    step = " ".join(step.split())
    if ">>" in step:
        subject, relation = (part.strip() for part in step.split(">>", 1))
        return f"What is the {relation} of {subject}?"
    return step.replace(" ?", "?")


def _ask(example, rng, others) -> list[dict]:
    steps = example.annotation.get("decomposition") or []
    if len(steps) < 2:
        return []

    def filled(text: str, upto: int) -> str:
        for j in range(upto):
            text = text.replace(f"#{j + 1}", steps[j]["answer"])
        return as_question(text)

    gold = example.annotation["gold"]
    demos = [{"question": example.question, "history": format_history([]), "max_questions": 2,
              "sub_questions": [filled(steps[0]["question"], 0)]}]
    demos.append({"question": example.question, "max_questions": 2,
                  "history": format_history([(filled(steps[0]["question"], 0), _facts(gold[:1]))]),
                  "sub_questions": [filled(steps[1]["question"], 1)]})
    return demos


def _summarize(example, rng, others) -> list[dict]:
    gold, distractors = example.annotation["gold"], example.annotation["distractors"]
    shown = gold[:1] + distractors[:1]
    return [{"question": example.question, "passages": _texts(shown), "evidence": _facts(gold[:1])}]


def _score(example, rng, others) -> list[dict]:
    history = format_history([(example.question, _facts(example.annotation["gold"]))])
    demos = [{"question": example.question, "history": history, "answer": example.answers[0], "confidence": 0.9}]
    wrong = [a for a in others if a.lower() not in {g.lower() for g in example.answers}]
    if wrong:
        demos.append({"question": example.question, "history": history, "answer": rng.choice(wrong),
                      "confidence": 0.1})
    return demos


def _background(example, rng, others) -> list[dict]:
    return [{"question": example.question, "document": _facts(example.annotation["gold"])}]


READERS = ("evidence", "analyses", "paragraphs", "passages")  # the context inputs a "read" demo can fill


def _read(example, rng, others, signature) -> list[dict]:
    name = next((n for n in READERS if n in signature.input_fields), None)
    if name is None:
        raise ValueError(f"a 'read' demo needs one of the inputs {', '.join(READERS)}; "
                         f"{signature.__name__} takes {', '.join(signature.input_fields)}")
    return _fuse(name)(example, rng, others)


BUILDERS: dict[str, Callable] = {  # kind -> (example, rng, other answers, signature) -> demos
    "review": lambda ex, rng, others, sig: _review(ex, rng, others, reasoning="reasoning" in sig.output_fields),
    "complete": lambda ex, rng, others, sig: _complete(ex, rng, others),
    "ask": lambda ex, rng, others, sig: _ask(ex, rng, others),
    "score": lambda ex, rng, others, sig: _score(ex, rng, others),
    "summarize": lambda ex, rng, others, sig: _summarize(ex, rng, others),
    "background": lambda ex, rng, others, sig: _background(ex, rng, others),
    "read": _read,
    "read-history": lambda ex, rng, others, sig: _history_answer(ex, rng, others),
}


def declared_kinds(program: dspy.Module) -> dict[str, str]:
    """Predictor name -> demo kind, as the program's class declares (`annotation_demos`, keyed by
    the predictor's attribute: `answer` covers `answer.predict`); an unknown kind is an error."""
    declared = getattr(program, "annotation_demos", {}) or {}  # an instance may read otherwise (beam's reading)
    unknown = sorted(set(declared.values()) - set(BUILDERS))
    if unknown:
        raise ValueError(f"{type(program).__name__}.annotation_demos names unknown demo kinds {unknown}; "
                         f"known: {', '.join(BUILDERS)}")
    return {name: declared[name.split(".")[0]] for name, _ in program.named_predictors()
            if name.split(".")[0] in declared}


class AnnotatedFewShot(Teleprompter):
    """Labeled demos for every inner predictor from the training annotations (no LM calls).

    Args:
        k: the most demos per predictor (the papers' prompts show 3).
        seed: which training questions and distractors are used.
    """

    def __init__(self, k: int = DEFAULT_K, seed: int = 0):
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k, self.seed = k, seed

    def compile(self, student: dspy.Module, *, trainset: Sequence[dspy.Example], teacher=None,
                valset=None, **kwargs) -> dspy.Module:
        usable_examples = [ex for ex in trainset if usable(ex)]
        if not usable_examples:
            raise ValueError("no training question has two or more annotated gold paragraphs "
                             "(the annotated optimizer needs hotpotqa, 2wikimultihopqa or musique train)")
        program = student.deepcopy()
        others = [ex.answers[0] for ex in usable_examples]
        kinds = declared_kinds(program)
        for name, predictor in program.named_predictors():
            if name not in kinds:
                continue
            build, signature = BUILDERS[kinds[name]], predictor.signature
            rng = random.Random(f"{self.seed}:{name}")
            order = list(usable_examples)
            rng.shuffle(order)
            fields = set(predictor.signature.fields)
            demos: list[dspy.Example] = []
            for example in order:  # every demo a question gives (a review: search, accept, reject), until k
                demos += [dspy.Example(**d) for d in build(example, rng, others, signature) if set(d) <= fields]
                if len(demos) >= self.k:
                    break
            demos = demos[:self.k]
            predictor.demos = demos
        program._compiled = True
        return program


register(Compiler("annotated", lambda c: (AnnotatedFewShot(k=c.spec.annotated_demos, seed=c.spec.seed), {}),
                  lambda per_q, n, t: 0, preparer=True, needs_annotations=True, from_annotations=True,
                  fits=lambda cls: bool(cls.annotation_demos),
                  unfit="declares no predictors the annotations can teach (annotation_demos)"))

