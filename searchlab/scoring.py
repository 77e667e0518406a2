"""Answer normalisation and answer scores: the one definition used by QA filters, RL rewards and evaluation.

Normalisation is the official SQuAD v1.1 / HotpotQA rule, exact match and F1 are
HotpotQA's (including its yes/no/noanswer rule for F1), and cover exact match is a
token-boundary-safe version of Search-R1/FlashRAG's "cover EM". Every score takes a
prediction and one gold answer or a list of them, and is the best over the golds.

>>> normalize_answer("The  Eiffel Tower!")
'eiffel tower'
>>> score("the Eiffel tower", ["Eiffel Tower", "Paris"])
Scores(em=1.0, f1=1.0, cover_em=1.0)
>>> score("Born in 1971.", "1971")
Scores(em=0.0, f1=0.5, cover_em=1.0)
>>> cover_exact_match("north", "no")
0.0
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Scores",
    "cover_exact_match",
    "exact_match",
    "f1",
    "mean_scores",
    "normalize_answer",
    "score",
]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# HotpotQA scores these answers all-or-nothing in F1: a partial overlap earns nothing.
_SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer(s: str | None) -> str:
    """Normalise an answer the official SQuAD v1.1 / HotpotQA way.

    In order: lowercase, drop every ``string.punctuation`` character, replace the
    whole words "a", "an" and "the" by spaces, and collapse whitespace to single
    spaces (no leading or trailing space). ``None`` is treated as "".

    >>> normalize_answer("An apple, a Banana and THE Anna's cart.")
    'apple banana and annas cart'
    """
    if s is None:
        return ""
    text = s.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _gold_list(golds: str | Sequence[str]) -> list[str]:
    """The golds as a non-empty list of strings; a bare string is one gold."""
    if isinstance(golds, str):
        return [golds]
    if golds is None:
        raise TypeError("golds must be a str or a non-empty list of str, not None")
    gold_list = list(golds)
    if not gold_list:
        raise ValueError("golds is empty: at least one gold answer is needed to score a prediction")
    for gold in gold_list:
        if not isinstance(gold, str):
            raise TypeError(f"every gold answer must be a str, got {type(gold).__name__}: {gold!r}")
    return gold_list


def _f1_one(prediction: str, gold: str) -> float:
    """HotpotQA's token F1 between two already-normalised answers."""
    if prediction in _SPECIAL_ANSWERS and prediction != gold:
        return 0.0
    if gold in _SPECIAL_ANSWERS and prediction != gold:
        return 0.0
    pred_tokens = prediction.split()
    gold_tokens = gold.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str | None, golds: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals some normalised gold, else 0.0.

    As in the official scripts, an empty normalised prediction matches an empty
    normalised gold (say the gold "The").

    >>> exact_match("The Beatles.", ["beatles", "Fab Four"])
    1.0
    """
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in _gold_list(golds)) else 0.0


def f1(prediction: str | None, golds: str | Sequence[str]) -> float:
    """The best official HotpotQA token F1 of the prediction over the golds.

    Tokens are the whitespace-split normalised answers, and the overlap is the
    multiset (``Counter``) intersection. HotpotQA's special rule applies: if the
    normalised prediction or the normalised gold is "yes", "no" or "noanswer" and
    the two differ, F1 is 0. No common tokens gives 0.

    >>> f1("Barack Obama", "Obama")
    0.6666666666666666
    >>> f1("yes", "yes sir")
    0.0
    """
    pred = normalize_answer(prediction)
    return max(_f1_one(pred, normalize_answer(g)) for g in _gold_list(golds))


def cover_exact_match(prediction: str | None, golds: str | Sequence[str]) -> float:
    """1.0 if some normalised gold occurs as a contiguous run of whole tokens in the normalised prediction.

    This is Search-R1's / FlashRAG's "cover EM" (also called "subEM"), which tests
    plain substring containment, made token-boundary safe: the gold "no" does not
    match the prediction "north", while "1971" matches "He was born in 1971.". A
    gold that normalises to "" (say "the") never matches.

    >>> cover_exact_match("It opened in Paris, France.", ["Paris"])
    1.0
    >>> cover_exact_match("Paristown", "Paris")
    0.0
    """
    # Normalised text is tokens joined by single spaces, so padding both sides
    # with one space turns substring search into whole-token-run search.
    padded_pred = f" {normalize_answer(prediction)} "
    for gold in _gold_list(golds):
        norm_gold = normalize_answer(gold)
        if norm_gold and f" {norm_gold} " in padded_pred:
            return 1.0
    return 0.0


@dataclass(frozen=True)
class Scores:
    """Exact match, token F1 and cover exact match of one prediction (or their means)."""

    em: float
    f1: float
    cover_em: float


def score(prediction: str | None, golds: str | Sequence[str]) -> Scores:
    """All three scores of a prediction against one gold or a list of golds.

    Each score is the best over the golds on its own, so ``em`` and ``f1`` may come
    from different golds.

    >>> score("Anna", "an Anna")
    Scores(em=1.0, f1=1.0, cover_em=1.0)
    """
    gold_list = _gold_list(golds)
    return Scores(
        em=exact_match(prediction, gold_list),
        f1=f1(prediction, gold_list),
        cover_em=cover_exact_match(prediction, gold_list),
    )


def mean_scores(scores: Iterable[Scores]) -> Scores:
    """The field-wise mean of several :class:`Scores`; an empty input raises ``ValueError``.

    >>> mean_scores([Scores(1.0, 1.0, 1.0), Scores(0.0, 0.5, 1.0)])
    Scores(em=0.5, f1=0.75, cover_em=1.0)
    """
    items = list(scores)
    if not items:
        raise ValueError("mean_scores got no scores: the mean of an empty list is undefined")
    n = len(items)
    return Scores(
        em=sum(s.em for s in items) / n,
        f1=sum(s.f1 for s in items) / n,
        cover_em=sum(s.cover_em for s in items) / n,
    )
