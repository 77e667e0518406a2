"""The evaluation results of an MLflow run, as ``metrics.json`` holds them (what `searchlab results RUN` prints).

A run is a pipeline run (its evaluate stage run is used) or an evaluate stage
run. The results come from, in this order:

1. the evaluate stage run's ``metrics.json`` artifact (logged when the stage computed);
2. for a cached evaluate stage, the artifact of the run that computed those
   results (tag ``searchlab.produced_by_run``: same fingerprint, same file);
3. else the stage run's own metrics (a cached stage logs them too), turned back
   into the same shape by :func:`results_from_metrics`: the benchmarks, systems
   and means with their intervals, in name order; comparisons are left out (the
   results table does not show them), and throughput kept.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from searchlab.eval.flat import is_eval_metric, with_intervals
from searchlab.params import TrackingParams
from tasks.tracking import TrackingError, evaluate_run

ARTIFACT = "metrics.json"
SYSTEMS = ("direct", "rag", "agent")  # searchlab.eval.systems.SYSTEMS, the order the report uses


def run_results(params: TrackingParams, root: Path, run_id: str) -> tuple[dict[str, Any], str]:
    """``(results, source)``: the evaluation results of MLflow run ``run_id`` and where they came from, in words.

    Raises :class:`TrackingError` saying why when the run does not exist or has no evaluation.
    """
    client, _, source = evaluate_run(params, root, run_id, "evaluation")
    evaluate_id = source.info.run_id
    producer = source.data.tags.get("searchlab.produced_by_run")
    for candidate, how in ((evaluate_id, f"{ARTIFACT} of evaluate run {evaluate_id}"),
                           (producer, f"evaluate run {evaluate_id} was cached: {ARTIFACT} of run {producer}, "
                                      "which computed those results")):
        results = _artifact(client, candidate) if candidate else None
        if results is not None:
            return results, how
    metrics = {name: value for name, value in source.data.metrics.items() if is_eval_metric(name)}
    if not metrics:
        raise TrackingError(f"run {run_id}: no evaluation results (its evaluate stage run {evaluate_id} ended "
                            f"{source.info.status} with no {ARTIFACT} and no eval metrics)")
    return results_from_metrics(metrics), f"the metrics of evaluate run {evaluate_id} (no {ARTIFACT} artifact)"


def _artifact(client, run_id: str) -> dict[str, Any] | None:
    """The run's ``metrics.json`` artifact, or None if it has none (or the run is not in this store)."""
    from mlflow.exceptions import MlflowException

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one small file: no bar on the console
    try:
        with tempfile.TemporaryDirectory() as folder:
            return json.loads(Path(client.download_artifacts(run_id, ARTIFACT, folder)).read_text())
    except (MlflowException, OSError, ValueError):
        return None


def results_from_metrics(flat: dict[str, float]) -> dict[str, Any]:
    """The results dict of :mod:`searchlab.eval.report` from :func:`searchlab.eval.flat.flat_metrics`'s names.

    ``eval/B/questions``, ``eval/B/MODEL-SYSTEM/METRIC`` (with ``_low``, ``_high``) and
    ``throughput/MODEL-SYSTEM/RATE``; a system name never holds ``-``, a model's may. The paired tests
    (``eval/B/A_vs_C/...``) are not rebuilt.

    >>> results_from_metrics({"eval/b/questions": 2.0, "eval/b/my-model-agent/em": 0.5,
    ...     "eval/b/my-model-agent/em_low": 0.0, "eval/b/my-model-agent/em_high": 1.0})["benchmarks"]
    {'b': {'questions': 2, 'systems': {'my-model/agent': {'em': {'mean': 0.5, 'low': 0.0, 'high': 1.0}}}}}
    """
    benchmarks: dict[str, dict[str, Any]] = {}
    throughput: dict[str, dict[str, float]] = {}
    for name, (value, low, high) in sorted(with_intervals(flat).items()):
        parts = name.split("/")
        if parts[0] == "throughput" and len(parts) == 3:
            throughput.setdefault(_system(parts[1]), {})[parts[2]] = value
        elif parts[0] == "eval" and len(parts) == 3 and parts[2] == "questions":
            benchmarks.setdefault(parts[1], {"questions": 0, "systems": {}})["questions"] = int(value)
        elif parts[0] == "eval" and len(parts) == 4 and "_vs_" not in parts[2]:
            entry = benchmarks.setdefault(parts[1], {"questions": 0, "systems": {}})
            summary = {"mean": value, "low": value if low is None else low, "high": value if high is None else high}
            entry["systems"].setdefault(_system(parts[2]), {})[parts[3]] = summary
    for entry in benchmarks.values():
        entry["systems"] = dict(sorted(entry["systems"].items(), key=lambda item: _order(item[0])))
    results: dict[str, Any] = {"benchmarks": benchmarks}
    if throughput:
        results["throughput"] = throughput
    return results


def _system(key: str) -> str:
    """``"my-model-agent"`` → ``"my-model/agent"`` (flat names join model and system with ``-``)."""
    model, _, system = key.rpartition("-")
    return f"{model}/{system}" if model else key


def _order(system: str) -> tuple[str, int]:
    model, _, name = system.rpartition("/")
    return model, SYSTEMS.index(name) if name in SYSTEMS else len(SYSTEMS)
