"""Shared test data: where the data lies (the hand-written fixtures, ../shared/data), what the
scripted LM answers the fixture questions, and the annotated training records (the `train`
fixture writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from treeqa.settings import PROJECT_ROOT

FIXTURE_DATA = Path(__file__).parent.parent / "fixtures" / "data"
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"

requires_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not present")

# what the `scripted` fixture's LM answers the fixture data's two HotpotQA dev questions (the Rigi one
# right, the Weggis one wrong); any other question is answered "unknown"
FIXTURE_ANSWERS = {"Rigi Railway company": "Lake Zurich", "Weggis": "yes"}


# --- annotated training records (the `train` fixture writes them) -------------------------------

def _hotpot(i, answer, gold, distractors):
    """A record in the official HotpotQA layout: `gold` and `distractors` are (title, [sentences])."""
    return {"_id": f"t{i}", "question": f"Question {i} about {gold[0][0]}?", "answer": answer, "type": "bridge",
            "level": "hard", "supporting_facts": [[t, 0] for t, _ in gold],
            "context": [[t, s] for t, s in gold + distractors]}


RECORDS = [
    _hotpot(1, "Vitznau", [("Rigi Railways", ["Rigi Railways runs cog trains.", " It is based in Vitznau."]),
                           ("Vitznau", ["Vitznau is a village on Lake Lucerne."])],
            [("Espresso", ["Espresso is coffee."])]),
    _hotpot(2, "1871", [("Cog railway", ["The first cog railway in Europe opened in 1871."]),
                        ("Mount Rigi", ["Mount Rigi is a mountain."])],
            [("Python", ["Python is a language."]), ("Tea", ["Tea is a drink."])]),
    _hotpot(3, "Lake Lucerne", [("Weggis", ["Weggis lies on Lake Lucerne."]),
                                ("Lake Lucerne", ["Lake Lucerne is in central Switzerland."])],
            [("Zurich", ["Zurich is a city."])]),
    {"_id": "t4", "question": "One hop only?", "answer": "x", "type": "bridge", "level": "easy",
     "supporting_facts": [["Solo", 0]], "context": [["Solo", ["Solo is alone."]]]},  # unusable: one gold paragraph
]


def _para(idx, title, text, supporting):
    return {"idx": idx, "title": title, "paragraph_text": text, "is_supporting": supporting}


MUSIQUE = {
    "id": "2hop__9", "question": "In which region is the lake that Weggis sits on?",
    "answer": "central Switzerland", "answer_aliases": [], "answerable": True,
    "paragraphs": [_para(0, "Lake Zurich", "Lake Zurich is a lake.", False),
                   _para(1, "Lake Lucerne", "Lake Lucerne lies in central Switzerland.", True),
                   _para(2, "Weggis", "Weggis sits on Lake Lucerne.", True)],
    "question_decomposition": [
        {"id": 1, "question": "Which lake does Weggis sit on?", "answer": "Lake Lucerne", "paragraph_support_idx": 2},
        {"id": 2, "question": "In which region is #1?", "answer": "central Switzerland", "paragraph_support_idx": 1},
    ],
}
