import pytest

from treeqa.metrics import exact_match, f1_score, normalize_answer, recall_at_k


@pytest.mark.parametrize("raw, expected", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  an   apple,  a pear ", "apple pear"),
    ("“Quoted” — text", "quoted text"),
    ("Théâtre", "théâtre"),
    ("", ""),
    ("theatre", "theatre"),  # 'the' inside a word is not an article
])
def test_normalize(raw, expected):
    assert normalize_answer(raw) == expected


def test_exact_match_ignores_case_articles_punctuation():
    assert exact_match("the Beatles.", ["Beatles"]) == 1.0
    assert exact_match("Beatles", "The Beatles") == 1.0
    assert exact_match("Rolling Stones", ["Beatles"]) == 0.0


def test_exact_match_takes_best_gold():
    assert exact_match("Lucerne", ["Lake Lucerne", "lucerne"]) == 1.0


def test_empty_prediction_scores_zero():
    assert exact_match("", ["Paris"]) == 0.0
    assert f1_score("", ["Paris"]) == 0.0


@pytest.mark.parametrize("prediction", ["", "The", " . ", "a"])
def test_an_empty_prediction_never_matches_a_gold_that_normalises_to_nothing(prediction):
    assert exact_match(prediction, ["The", "Paris"]) == 0.0
    assert f1_score(prediction, ["The"]) == 0.0


def test_f1_partial_overlap_and_max_over_golds():
    # pred tokens {barack, obama}, gold {obama}: p=1/2, r=1 -> 2/3
    assert f1_score("Barack Obama", ["Obama"]) == pytest.approx(2 / 3)
    assert f1_score("Barack Obama", ["Michelle", "Barack Obama"]) == 1.0
    assert f1_score("blue", ["red"]) == 0.0


def test_f1_counts_repeated_tokens_once_each():
    assert f1_score("new new york", ["new york"]) == pytest.approx(0.8)


def test_recall_counts_paragraphs_not_titles():
    # two paragraphs of one article: finding the distractor does not recall the gold one
    assert recall_at_k(["id-distractor", "id-other"], ["id-gold"], 15) == 0.0
    assert recall_at_k(["id-distractor", "id-gold"], ["id-gold"], 15) == 1.0


def test_recall_at_k():
    retrieved = ["A", "B", "C", "D"]
    assert recall_at_k(retrieved, ["A", "D"], 2) == 0.5
    assert recall_at_k(retrieved, ["A", "D"], 4) == 1.0
    assert recall_at_k(retrieved, ["A", "A"], 1) == 1.0
    with pytest.raises(ValueError):
        recall_at_k(retrieved, [], 3)
    with pytest.raises(ValueError):
        recall_at_k(retrieved, ["A"], 0)
