"""Answer scores: official SQuAD/HotpotQA normalisation, EM, F1 (with the yes/no rule) and token-safe cover EM.

Expected values are worked out by hand in the comments, never taken from the module.
"""

import dataclasses
import doctest

import pytest

import searchlab.scoring as scoring
from searchlab.scoring import (
    Scores,
    cover_exact_match,
    exact_match,
    f1,
    mean_scores,
    normalize_answer,
    score,
)


# --- normalize_answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("eiffel tower", "eiffel tower"),
        ("An apple a day", "apple day"),
        ("Anna", "anna"),  # "an" inside a word stays
        ("Anne and an ant", "anne and ant"),
        ("theater THE them", "theater them"),
        ("A.B.C.", "abc"),
        ("don't", "dont"),
        ("the-end", "theend"),  # punctuation goes before articles, so "the" is no longer a whole word
        ("a, b", "b"),  # ...and removing the comma leaves "a" a whole word
        ("the", ""),
        ("", ""),
    ],
)
def test_normalize_answer_official_rule(raw, expected):
    assert normalize_answer(raw) == expected


def test_normalize_answer_whitespace_and_unicode():
    assert normalize_answer("  Eiffel\t\n  Tower\u00a0 ") == "eiffel tower"
    assert normalize_answer("Café MÜLLER") == "café müller"
    # "thé" is one Unicode word, so the article rule leaves it alone.
    assert normalize_answer("Thé") == "thé"
    # Only ASCII string.punctuation is removed, as in the official script.
    assert normalize_answer("Zürich\u2019s") == "zürich\u2019s"


def test_normalize_answer_none_is_empty():
    assert normalize_answer(None) == ""


# --- exact_match -------------------------------------------------------------------------------


def test_exact_match_ignores_articles_punctuation_case():
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "eiffel tower") == 0.0
    assert exact_match("Anna", "an Anna") == 1.0
    assert exact_match("Anna", "an") == 0.0


def test_exact_match_any_of_several_golds():
    assert exact_match("Fab Four", ["The Beatles", "the fab four"]) == 1.0
    assert exact_match("Rolling Stones", ["The Beatles", "the fab four"]) == 0.0
    assert exact_match("Fab Four", ("The Beatles", "the fab four")) == 1.0


# --- f1 ----------------------------------------------------------------------------------------


def test_f1_partial_overlap_by_hand():
    # pred tokens [quick, brown, fox, jumps], gold [quick, red, fox]: 2 common,
    # P = 2/4, R = 2/3, F1 = 2 * (1/2)(2/3) / (1/2 + 2/3) = 4/7.
    assert f1("The quick brown fox jumps", "a quick red fox") == pytest.approx(4 / 7)


def test_f1_counts_repeated_tokens_as_multiset():
    # Counter intersection: "paris" is common once. P = 1/3, R = 1, F1 = 1/2.
    assert f1("Paris Paris Paris", "Paris") == pytest.approx(0.5)
    # new/york each common once: P = 2/4, R = 1, F1 = 2/3.
    assert f1("new york new york", "New York") == pytest.approx(2 / 3)


def test_f1_takes_the_best_gold():
    # vs "obama": P = 1/2, R = 1 -> 2/3; vs "barack hussein obama": P = 1, R = 2/3 -> 4/5.
    assert f1("Barack Obama", ["Obama", "Barack Hussein Obama"]) == pytest.approx(0.8)


def test_f1_exact_and_disjoint():
    assert f1("The Eiffel Tower!", "eiffel tower") == 1.0
    assert f1("London", "Paris") == 0.0


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("yes", "no", 0.0),
        ("Yes.", "yes", 1.0),
        ("yes", "yes sir", 0.0),  # prediction is special and differs (plain F1 would be 2/3)
        ("yes sir", "yes", 0.0),  # gold is special and differs (plain F1 would be 2/3)
        ("no", "no way", 0.0),
        ("no way", "No way!", 1.0),  # neither side is special
        ("noanswer", "no answer", 0.0),
        ("no answer", "noanswer", 0.0),
        ("The noanswer.", "noanswer", 1.0),
    ],
)
def test_f1_hotpotqa_yes_no_noanswer_rule(prediction, gold, expected):
    assert f1(prediction, gold) == expected


def test_f1_yes_no_rule_is_per_gold():
    assert f1("yes", ["no", "Yes"]) == 1.0
    assert f1("yes", ["no", "yes sir"]) == 0.0


# --- cover_exact_match --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("north", "no", 0.0),  # plain substring "cover EM" would say 1
        ("No, never.", "no", 1.0),
        ("He was born in 1971.", "1971", 1.0),
        ("19710", "1971", 0.0),
        ("North Korea", "Korea", 1.0),
        ("South Koreas", "Korea", 0.0),
        ("I live in New York City", "new york", 1.0),
        ("York, New", "new york", 0.0),  # tokens must be contiguous and in order
        ("Annapolis", "an Anna", 0.0),
        ("the Eiffel Tower!", "Eiffel Tower", 1.0),
    ],
)
def test_cover_exact_match_token_boundaries(prediction, gold, expected):
    assert cover_exact_match(prediction, gold) == expected


def test_cover_exact_match_empty_gold_never_matches():
    assert cover_exact_match("", "the") == 0.0
    assert cover_exact_match("the answer is paris", ["The", "..."]) == 0.0
    assert cover_exact_match("the answer is paris", ["The", "Paris"]) == 1.0


# --- empty and missing inputs -----------------------------------------------------------------


@pytest.mark.parametrize("prediction", ["", None, "  !!  ", "the"])
def test_empty_prediction_scores_zero(prediction):
    assert score(prediction, "Paris") == Scores(em=0.0, f1=0.0, cover_em=0.0)


def test_empty_prediction_against_empty_gold_follows_official_em():
    # Official EM compares strings ("" == ""); F1 has no tokens in common; cover EM never matches "".
    assert score("", "The") == Scores(em=1.0, f1=0.0, cover_em=0.0)


@pytest.mark.parametrize("fn", [exact_match, f1, cover_exact_match, score])
def test_empty_gold_list_is_an_error(fn):
    with pytest.raises(ValueError, match="golds is empty"):
        fn("Paris", [])


@pytest.mark.parametrize("golds", [None, ["Paris", None], ["Paris", 3]])
def test_non_string_golds_are_a_type_error(golds):
    with pytest.raises(TypeError):
        score("Paris", golds)


# --- score and mean_scores --------------------------------------------------------------------


def test_score_takes_each_best_on_its_own():
    # EM: neither "paris" nor "france paris" equals "paris france" -> 0.
    # F1: vs "paris" P = 1/2, R = 1 -> 2/3; vs "france paris" 2 common of 2 -> 1.
    # Cover: "paris" is a token of the prediction -> 1.
    assert score("Paris, France", ["Paris", "France, Paris"]) == Scores(em=0.0, f1=1.0, cover_em=1.0)


def test_score_one_string_gold():
    # Tokens [born, in, 1971] vs [1971]: P = 1/3, R = 1, F1 = 1/2.
    result = score("Born in 1971.", "1971")
    assert (result.em, result.cover_em) == (0.0, 1.0)
    assert result.f1 == pytest.approx(0.5)


def test_scores_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Scores(1.0, 1.0, 1.0).em = 0.0


def test_mean_scores_field_wise():
    mean = mean_scores([Scores(1.0, 1.0, 1.0), Scores(0.0, 0.5, 0.0), Scores(0.0, 0.0, 1.0)])
    assert mean.em == pytest.approx(1 / 3)
    assert mean.f1 == pytest.approx(0.5)
    assert mean.cover_em == pytest.approx(2 / 3)


def test_mean_scores_of_one_is_itself():
    assert mean_scores([Scores(0.0, 0.25, 1.0)]) == Scores(0.0, 0.25, 1.0)


def test_mean_scores_empty_is_an_error():
    with pytest.raises(ValueError, match="no scores"):
        mean_scores([])


def test_module_doctests_pass():
    failures, tried = doctest.testmod(scoring)
    assert tried > 0 and failures == 0
