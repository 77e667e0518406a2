"""The evaluation results as flat, stable metric names (what MLflow logs and ``searchlab compare`` shows).

From the results of :func:`searchlab.eval.run.run_evaluation` (``metrics.json``)::

    eval/<benchmark>/<model>-<system>/<metric>          mean per question (em, f1, cover_em, found_evidence,
    eval/<benchmark>/<model>-<system>/<metric>_low      searches, turns, generated_tokens, seconds) and the
    eval/<benchmark>/<model>-<system>/<metric>_high     bounds of its 95% bootstrap interval
    eval/<benchmark>/questions                          questions evaluated
    eval/<benchmark>/<model>-agent_vs_<model>-rag/em_diff (_low, _high), .../p_value    the paired EM tests
    throughput/<model>-<system>/questions_per_s

The names hold only characters MLflow accepts in metric names, provided benchmark and model names do (the
params schema sees to that).

>>> flat_metrics({"benchmarks": {"b": {"questions": 2, "systems": {"sft/agent": {"em": {
...     "mean": 0.5, "low": 0.0, "high": 1.0}}}}}})["eval/b/sft-agent/em"]
0.5
"""

from __future__ import annotations

from typing import Any

LOW, HIGH = "_low", "_high"


def _key(system: str) -> str:
    """``"sft/agent"`` → ``"sft-agent"``: one path segment per model and system."""
    return system.replace("/", "-")


def _interval(name: str, mean: float, low: float, high: float) -> dict[str, float]:
    return {name: float(mean), name + LOW: float(low), name + HIGH: float(high)}


def flat_metrics(results: dict[str, Any]) -> dict[str, float]:
    """Every number of the results under its flat name (see the module doc), in the results' order."""
    flat: dict[str, float] = {}
    for benchmark, entry in results["benchmarks"].items():
        prefix = f"eval/{benchmark}"
        flat[f"{prefix}/questions"] = float(entry["questions"])
        for system, summary in entry["systems"].items():
            for metric, value in summary.items():
                flat.update(_interval(f"{prefix}/{_key(system)}/{metric}", value["mean"], value["low"], value["high"]))
        for comparison, test in (entry.get("comparisons") or {}).items():
            first, _, second = comparison.partition(" vs ")
            name = f"{prefix}/{_key(first)}_vs_{_key(second)}"
            flat.update(_interval(f"{name}/em_diff", test["difference"], test["low"], test["high"]))
            flat[f"{name}/p_value"] = float(test["p_value"])
    for system, rates in (results.get("throughput") or {}).items():
        for rate, value in rates.items():
            flat[f"throughput/{_key(system)}/{rate}"] = float(value)
    return flat


def headline_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The results at a glance (what a pipeline run's own MLflow run carries): EM with its 95% interval,
    ``eval/<benchmark>/<model>-<system>/em`` (``_low``, ``_high``), for every benchmark, model and system."""
    return {name: value for name, value in flat_metrics(results).items()
            if name.endswith(("/em", "/em" + LOW, "/em" + HIGH)) and "_vs_" not in name}


def is_eval_metric(name: str) -> bool:
    """Whether an MLflow metric name is one of :func:`flat_metrics`'s."""
    return name.startswith(("eval/", "throughput/"))


def with_intervals(flat: dict[str, float]) -> dict[str, tuple[float, float | None, float | None]]:
    """``{name: (value, low, high)}``: each ``_low``/``_high`` bound folded into the row of its metric.

    A bound whose metric is missing keeps a row of its own, so nothing given is dropped.
    """
    rows: dict[str, tuple[float, float | None, float | None]] = {}
    for name, value in flat.items():
        for suffix in (LOW, HIGH):
            if name.endswith(suffix) and name[: -len(suffix)] in flat:
                break
        else:
            rows[name] = (value, flat.get(name + LOW), flat.get(name + HIGH))
    return rows
