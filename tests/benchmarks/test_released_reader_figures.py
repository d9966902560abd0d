"""`benchmarks/released_reader.py`: the released reader's validation EM paired with the base
reader's on the same reads, and the share of "yes" it says where the gold is yes or no."""

from tests.fakes import benchmark_script


def _script():
    return benchmark_script("released_reader")


def rec(qid, dataset, gold, prediction):
    return {"id": qid, "dataset": dataset, "gold": gold, "prediction": prediction, "em": float(gold == prediction),
            "f1": float(gold == prediction)}


def test_validation_pairs_the_reads_and_counts_yes_where_the_gold_is_yes_or_no():
    base = [rec("a", "2wiki", "yes", "no"), rec("b", "2wiki", "no", "no"), rec("c", "hotpotqa", "Paris", "Rome"),
            rec("d", "hotpotqa", "1692", "1692")]
    trained = [rec("a", "2wiki", "yes", "yes"), rec("b", "2wiki", "no", "no"), rec("c", "hotpotqa", "Paris", "Paris"),
               rec("d", "hotpotqa", "1692", "1692")]
    figures = _script().validation(trained, base)
    assert (figures["reads"], figures["em"], figures["base_em"]) == (4, 100.0, 50.0)
    assert figures["em_vs_base"]["wins"] == 2 and figures["em_vs_base"]["losses"] == 0
    assert figures["yes_no"] == {"2wiki": {"reads": 2, "gold_yes": 1, "said_yes": 1}}
    assert figures["base_yes_no"] == {"2wiki": {"reads": 2, "gold_yes": 1, "said_yes": 0}}
