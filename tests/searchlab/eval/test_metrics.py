"""Per-question records and their summaries, from real rollouts' fields and the real scoring and bootstrap."""

from __future__ import annotations

import pytest

from searchlab.agent.episode import Rollout
from searchlab.eval.metrics import compare, question_record, summarize
from searchlab.questions.formats import Question

KELMORA = Question("q1", "When was Kelmora founded?", ["1167"], {"evidence": ["k-0"]})


def _episode(answer: str | None, searches: list[str], retrieved: list[list[str]]) -> Rollout:
    return Rollout(KELMORA.question, "p", answer=answer, searches=searches, retrieved=retrieved, turns=2,
                   generated_tokens=30, seconds=0.5)


def test_a_record_scores_the_answer_and_counts_the_costs():
    record = question_record(KELMORA, _episode("the year 1167", ["Kelmora founded"], [["k-0", "k-1"]]))
    assert (record["em"], record["cover_em"]) == (0.0, 1.0) and 0 < record["f1"] < 1
    assert (record["searches"], record["turns"], record["generated_tokens"]) == (1, 2, 30)
    assert "seconds" not in record  # a duration differs between two runs of the same evaluation
    assert record["found_evidence"] == 1.0 and record["prediction"] == "the year 1167"
    missed = question_record(KELMORA, _episode(None, ["Halkrelt"], [["h-0"]]))
    assert (missed["em"], missed["f1"], missed["found_evidence"]) == (0.0, 0.0, 0.0)
    external = question_record(Question("n-1", "Who?", ["Ann"], {}), _episode("Ann", [], []))
    assert external["em"] == 1.0 and "found_evidence" not in external  # no evidence listed: not measured


def test_summaries_give_each_metric_a_mean_inside_its_interval():
    records = [question_record(KELMORA, _episode("1167" if i % 4 else "1200", ["q"] * (i % 3), [["k-0"]]))
               for i in range(40)]
    summary = summarize(records, resamples=500)
    assert list(summary) == ["em", "f1", "cover_em", "found_evidence", "searches", "turns", "generated_tokens"]
    assert summary["em"]["mean"] == 0.75 and summary["em"]["low"] < 0.75 < summary["em"]["high"]
    assert summary["searches"]["mean"] == pytest.approx(sum(i % 3 for i in range(40)) / 40)
    assert summary["turns"] == {"mean": 2.0, "low": 2.0, "high": 2.0}
    with pytest.raises(ValueError, match="no records"):
        summarize([])


def test_compare_pairs_questions_by_id():
    questions = [Question(f"q{i}", "?", ["yes"], {}) for i in range(60)]
    good = [question_record(q, _episode("yes", [], [])) for q in questions]
    poor = [question_record(q, _episode("yes" if i % 5 == 0 else "no", [], [])) for i, q in enumerate(questions)]
    result = compare(good, list(reversed(poor)), resamples=500)  # order does not matter, ids do
    assert result["difference"] == pytest.approx(0.8) and result["low"] > 0 and result["p_value"] < 0.01
    assert compare(good, good, resamples=500)["p_value"] == 1.0
    with pytest.raises(ValueError, match="same questions"):
        compare(good, poor[:-1])
