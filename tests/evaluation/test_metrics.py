import pytest

from treeqa.data.answers import normalize_answer
from treeqa.evaluation.metrics import answer_hit_at_k, answer_in_text, exact_match, f1_score, recall_at_k


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


def test_a_gold_answer_in_a_passage_counts_as_whole_words_after_normalising():
    """DPR's has-answer test, ALLIES' Table 3: where no gold passage is annotated (TriviaQA, WebQ)."""
    assert answer_in_text("It was won by the Philadelphia Eagles in 2018.", ["2018", "Eagles"])
    assert answer_in_text("Capital: BELGRADE, Serbia", ["Belgrade"])  # case and punctuation
    assert not answer_in_text("Grandeur in 20189 acres", ["2018"])  # whole words only
    assert not answer_in_text("the the", ["The"])  # a gold that normalises to nothing never hits
    texts = ["nothing here", "nor here", "Rudolf Hess was the last inmate"]
    assert answer_hit_at_k(texts, ["Rudolf Hess"], 3) == 1.0
    assert answer_hit_at_k(texts, ["Rudolf Hess"], 2) == 0.0
    assert answer_hit_at_k([], ["x"], 15) == 0.0
    with pytest.raises(ValueError):
        answer_hit_at_k(texts, ["x"], 0)
