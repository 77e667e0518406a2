"""Per-question results of one system on one benchmark, their means with 95% bootstrap intervals, and comparisons.

A *record* is one question's outcome: the prediction, its scores (EM, F1,
cover EM from :mod:`searchlab.scoring`), what it cost (searches, turns,
generated tokens; not seconds, which vary from run to run and go to the
stage's build record) and, when the benchmark lists the evidence passages
(the world suites do, in ``metadata.evidence``), whether the retrievals found
them all. Every metric is a mean of a per-question value, so each gets a
bootstrap interval, and two systems on the same questions get a paired test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchlab.agent.episode import Rollout
from searchlab.agent.samples import found_evidence
from searchlab.eval.stats import bootstrap_ci, paired_bootstrap
from searchlab.questions.formats import Question
from searchlab.scoring import score

SCORES = ("em", "f1", "cover_em")
COSTS = ("searches", "turns", "generated_tokens")


def question_record(question: Question, episode: Rollout) -> dict[str, Any]:
    """One question's outcome, with the whole trajectory for reading it later."""
    scores = score(episode.answer, question.answers)
    record = {"id": question.id, "question": question.question, "answers": question.answers,
              "prediction": episode.answer, "em": scores.em, "f1": scores.f1, "cover_em": scores.cover_em,
              "searches": len(episode.searches), "turns": episode.turns,
              "generated_tokens": episode.generated_tokens,
              "queries": episode.searches, "retrieved": episode.retrieved, "completion": episode.completion}
    evidence = question.metadata.get("evidence")
    if evidence:
        record["found_evidence"] = float(found_evidence(episode, evidence))
    return record


def mean_record(records: Sequence[dict]) -> dict[str, Any]:
    """One question's record from several sampled episodes of it: the first episode's details, every score and
    cost the mean over them, and ``samples`` (their predictions)."""
    first = dict(records[0])
    for name in (*SCORES, "found_evidence", *COSTS):
        if name in first:
            first[name] = sum(r[name] for r in records) / len(records)
    first["samples"] = [r["prediction"] for r in records]
    return first


def metric_names(records: Sequence[dict]) -> list[str]:
    """The metrics the records carry: the scores, ``found_evidence`` when every record has it, the costs."""
    evidence = ["found_evidence"] if records and all("found_evidence" in r for r in records) else []
    return [*SCORES, *evidence, *COSTS]


def summarize(records: Sequence[dict], resamples: int = 2000, seed: int = 0) -> dict[str, dict[str, float]]:
    """``{metric: {"mean", "low", "high"}}`` over the records (95% percentile-bootstrap intervals)."""
    if not records:
        raise ValueError("no records to summarize")
    summary = {}
    for name in metric_names(records):
        interval = bootstrap_ci([r[name] for r in records], resamples=resamples, seed=seed)
        summary[name] = {"mean": interval.mean, "low": interval.low, "high": interval.high}
    return summary


def compare(a: Sequence[dict], b: Sequence[dict], metric: str = "em", resamples: int = 2000,
            seed: int = 0) -> dict[str, float]:
    """Paired bootstrap of ``metric`` between two systems' records of the same questions (matched by id).

    Returns the difference ``a - b``, its 95% interval and the two-sided p-value.
    """
    by_id = {r["id"]: r for r in b}
    if sorted(by_id) != sorted(r["id"] for r in a):
        raise ValueError("the two systems were not scored on the same questions")
    test = paired_bootstrap([r[metric] for r in a], [by_id[r["id"]][metric] for r in a],
                            resamples=resamples, seed=seed)
    return {"difference": test.difference, "low": test.low, "high": test.high, "p_value": test.p_value}
