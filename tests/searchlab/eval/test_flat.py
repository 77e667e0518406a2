"""Flat metric names of the evaluation results: stable, MLflow-valid, and folded back into (value, CI) rows."""

from __future__ import annotations

import re

from searchlab.eval.flat import flat_metrics, is_eval_metric, with_intervals

RESULTS = {
    "benchmarks": {"world-single": {
        "questions": 4,
        "systems": {"sft/agent": {"em": {"mean": 0.5, "low": 0.25, "high": 0.75},
                                  "searches": {"mean": 1.5, "low": 1.0, "high": 2.0}},
                    "sft/rag": {"em": {"mean": 0.25, "low": 0.0, "high": 0.5}}},
        "comparisons": {"sft/agent vs sft/rag": {"difference": 0.25, "low": 0.0, "high": 0.5, "p_value": 0.04}}}},
    "throughput": {"sft/agent": {"questions_per_s": 3.5}},
}


def test_names_values_and_intervals():
    flat = flat_metrics(RESULTS)
    assert flat["eval/world-single/questions"] == 4
    assert (flat["eval/world-single/sft-agent/em"], flat["eval/world-single/sft-agent/em_low"],
            flat["eval/world-single/sft-agent/em_high"]) == (0.5, 0.25, 0.75)
    assert flat["eval/world-single/sft-agent_vs_sft-rag/em_diff"] == 0.25
    assert flat["eval/world-single/sft-agent_vs_sft-rag/p_value"] == 0.04
    assert flat["throughput/sft-agent/questions_per_s"] == 3.5
    assert all(re.match(r"^[/\w.\- :]*$", name) and is_eval_metric(name) for name in flat)  # MLflow's rule
    assert len(flat) == 1 + 3 * 3 + 4 + 1

    rows = with_intervals({**flat, "eval/x/orphan_low": 1.0})
    assert rows["eval/world-single/sft-agent/em"] == (0.5, 0.25, 0.75)
    assert rows["eval/world-single/questions"] == (4, None, None)
    assert "eval/world-single/sft-agent/em_low" not in rows and rows["eval/x/orphan_low"] == (1.0, None, None)
