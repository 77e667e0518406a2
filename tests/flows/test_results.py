"""`searchlab results`: the latest evaluation's table, or an MLflow run's (artifact, producer's artifact, metrics)."""

from __future__ import annotations

import pytest

import json

from searchlab.eval.flat import flat_metrics
from searchlab.eval.report import results_table
from tests.conftest import make_project, run_cli


def _summary(em: float, searches: float) -> dict:
    figures = {"em": em, "f1": em + 0.05, "cover_em": em + 0.1, "found_evidence": 0.5, "searches": searches,
               "turns": searches + 1, "generated_tokens": 80.0, "seconds": 0.25}
    return {name: {"mean": value, "low": value / 2, "high": min(value * 1.5, 100)} for name, value in figures.items()}


# in the order results_from_metrics rebuilds it (benchmarks and models by name, systems direct, rag, agent)
RESULTS = {
    "benchmarks": {
        "world-bridge": {"questions": 20, "systems": {
            "sft/direct": _summary(0.0, 0.0), "sft/rag": _summary(0.1, 0.0), "sft/agent": _summary(0.25, 1.8),
            "tiny-rl/agent": _summary(0.3, 2.0)},
            "comparisons": {"sft/agent vs sft/rag": {"difference": 0.15, "low": 0.0, "high": 0.3, "p_value": 0.04}}},
        "world-single": {"questions": 12, "systems": {"sft/agent": _summary(0.5, 1.1)}, "comparisons": {}},
    },
    "throughput": {"sft/agent": {"questions_per_s": 3.5}},
}


def test_results_from_metrics_rebuilds_the_results_table():
    from flows.results import results_from_metrics

    rebuilt = results_from_metrics(flat_metrics(RESULTS))
    assert results_table(rebuilt) == results_table(RESULTS)
    assert rebuilt["throughput"] == RESULTS["throughput"]
    assert rebuilt["benchmarks"]["world-bridge"]["systems"]["tiny-rl/agent"] == _summary(0.3, 2.0)


def test_results_prints_the_latest_evaluation_or_names_the_missing_file(tmp_path):
    project = make_project(tmp_path / "project")
    missing = run_cli(project, "results", check=False, timeout=60)
    assert missing.returncode == 1
    assert f"no evaluation results: {project}/data/evaluate/metrics.json does not exist" in missing.stderr
    assert "searchlab run evaluate" in missing.stderr
    (project / "data/evaluate").mkdir(parents=True)
    (project / "data/evaluate/metrics.json").write_text(json.dumps(RESULTS))
    shown = run_cli(project, "results", timeout=60)
    assert f"evaluation ({project}/data/evaluate/report.md" in shown.stdout
    assert results_table(RESULTS) in shown.stdout


@pytest.mark.slow
def test_results_of_mlflow_runs_from_the_artifact_its_producer_or_the_metrics(tmp_path):
    from mlflow import MlflowClient

    project = make_project(tmp_path / "project")
    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")  # the project's default store
    experiment = client.create_experiment("searchlab", artifact_location=(tmp_path / "artifacts").as_uri())
    (tmp_path / "metrics.json").write_text(json.dumps(RESULTS))

    def stage_run(parent: str | None, stage: str, tags: dict | None = None, artifact: bool = False,
                  metrics: dict | None = None) -> str:
        run_tags = {"searchlab.stage": stage, **(tags or {})}
        if parent:
            run_tags["mlflow.parentRunId"] = parent
        run_id = client.create_run(experiment, tags=run_tags).info.run_id
        for name, value in (metrics or {}).items():
            client.log_metric(run_id, name, value)
        if artifact:
            client.log_artifact(run_id, str(tmp_path / "metrics.json"))
        client.set_terminated(run_id)
        return run_id

    computed_pipeline = client.create_run(experiment).info.run_id
    computed = stage_run(computed_pipeline, "evaluate", artifact=True, metrics=flat_metrics(RESULTS))
    corpus = stage_run(computed_pipeline, "corpus")
    cached_pipeline = client.create_run(experiment).info.run_id
    cached = stage_run(cached_pipeline, "evaluate", {"searchlab.produced_by_run": computed},
                       metrics=flat_metrics(RESULTS))
    pulled = stage_run(None, "evaluate", {"searchlab.produced_by_run": "0" * 32}, metrics=flat_metrics(RESULTS))
    no_eval = client.create_run(experiment).info.run_id

    shown = run_cli(project, "results", computed_pipeline, cached_pipeline, pulled, timeout=120)
    assert f"run {computed_pipeline} (metrics.json of evaluate run {computed}):" in shown.stdout
    assert (f"run {cached_pipeline} (evaluate run {cached} was cached: metrics.json of run {computed}, which "
            "computed those results):") in shown.stdout
    assert f"run {pulled} (the metrics of evaluate run {pulled} (no metrics.json artifact)):" in shown.stdout
    assert shown.stdout.count(results_table(RESULTS)) == 3
    assert "Downloading artifacts" not in shown.stdout + shown.stderr

    bad = run_cli(project, "results", corpus, no_eval, "nosuch", check=False, timeout=120)
    assert bad.returncode == 1
    assert f"run {corpus}: no evaluation (the corpus stage's run; give a pipeline run or its evaluate" in bad.stderr
    assert f"run {no_eval}: no evaluation (a pipeline run without the evaluate stage)" in bad.stderr
    assert "run nosuch: no such run in sqlite:///" in bad.stderr
