"""IR metrics with trec_eval's semantics, in plain Python.

Matches ``trec_eval`` 9 (and ``pytrec_eval``) on the measures BEIR reports:

* a run is ranked by score, highest first; equal scores are ordered by document
  id *descending* (trec_eval sorts ``(score, docno)`` in reverse), whatever
  order the run listed them in;
* a document is relevant when its judgement is ``>= 1``; unjudged documents are
  not relevant;
* ``ndcg_cut_N``: gain = the judgement itself (not ``2^rel - 1``), discount
  ``log2(rank + 1)``; the ideal ranking sorts all judged documents by gain;
* ``recall_N``: relevant documents in the top N / all relevant documents;
* ``map``: average precision over *all* relevant documents (unretrieved ones add 0);
* a query is scored when it is in both the run and the qrels (an empty result
  list counts, with 0s); a query without relevant documents scores 0.

>>> evaluate_run({"q1": {"d1": 2.0, "d2": 1.0}}, {"q1": {"d2": 1}})["map"]
0.5
"""

from __future__ import annotations

import math
import re

DEFAULT_METRICS = ("ndcg_cut_10", "recall_100", "map")
_CUTOFF = re.compile(r"^(ndcg_cut|recall|P)_(\d+)$")


def rank(scores: dict[str, float]) -> list[str]:
    """Document ids ordered as trec_eval orders them: score descending, then id descending."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def average_precision(ranking: list[str], judged: dict[str, int]) -> float:
    """AP of one ranking: mean over all relevant documents of the precision at their rank (0 if not retrieved)."""
    relevant = sum(1 for rel in judged.values() if rel >= 1)
    if relevant == 0:
        return 0.0
    found, total = 0, 0.0
    for position, doc in enumerate(ranking, start=1):
        if judged.get(doc, 0) >= 1:
            found += 1
            total += found / position
    return total / relevant


def ndcg_at(ranking: list[str], judged: dict[str, int], cutoff: int) -> float:
    """trec_eval's ``ndcg_cut``: linear gains, log2 discount, ideal DCG from the judgements, both cut at ``cutoff``."""
    dcg = sum(
        judged.get(doc, 0) / math.log2(position + 1)
        for position, doc in enumerate(ranking[:cutoff], start=1)
        if judged.get(doc, 0) > 0
    )
    ideal_gains = sorted((rel for rel in judged.values() if rel > 0), reverse=True)[:cutoff]
    ideal = sum(gain / math.log2(position + 1) for position, gain in enumerate(ideal_gains, start=1))
    return dcg / ideal if ideal > 0 else 0.0


def recall_at(ranking: list[str], judged: dict[str, int], cutoff: int) -> float:
    """Share of the relevant documents found in the top ``cutoff``."""
    relevant = sum(1 for rel in judged.values() if rel >= 1)
    if relevant == 0:
        return 0.0
    return sum(1 for doc in ranking[:cutoff] if judged.get(doc, 0) >= 1) / relevant


def precision_at(ranking: list[str], judged: dict[str, int], cutoff: int) -> float:
    """Relevant documents in the top ``cutoff`` divided by ``cutoff`` (trec_eval's ``P_N``)."""
    return sum(1 for doc in ranking[:cutoff] if judged.get(doc, 0) >= 1) / cutoff


def _measure(name: str):
    if name == "map":
        return average_precision
    match = _CUTOFF.match(name)
    if not match:
        raise ValueError(f"unknown metric {name!r}: use map, ndcg_cut_N, recall_N or P_N")
    kind, cutoff = match.group(1), int(match.group(2))
    function = {"ndcg_cut": ndcg_at, "recall": recall_at, "P": precision_at}[kind]
    return lambda ranking, judged: function(ranking, judged, cutoff)


def evaluate_run(
    run: dict[str, dict[str, float]],
    qrels: dict[str, dict[str, int]],
    metrics: tuple[str, ...] = DEFAULT_METRICS,
) -> dict:
    """Score ``run`` (query → doc → score) against ``qrels`` (query → doc → judgement).

    Returns ``{metric: mean, ..., "num_queries": n, "per_query": {qid: {metric: value}}}``
    over the queries present in both (see the module docstring).
    """
    measures = {name: _measure(name) for name in metrics}
    per_query: dict[str, dict[str, float]] = {}
    for qid in sorted(run):
        if qid not in qrels:
            continue
        ranking, judged = rank(run[qid]), qrels[qid]
        per_query[qid] = {name: measure(ranking, judged) for name, measure in measures.items()}
    summary: dict = {
        name: (sum(values[name] for values in per_query.values()) / len(per_query) if per_query else 0.0)
        for name in metrics
    }
    summary["num_queries"] = len(per_query)
    summary["per_query"] = per_query
    return summary
