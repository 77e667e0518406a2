"""MLflow tracking against a real SQLite store in a temp dir: parent run, nested stage runs, cached link."""

from pathlib import Path

from mlflow import MlflowClient

from searchlab.params import TrackingParams, load_params
from tasks.stage import RunContext, folder_hash, run_stage
from tasks.tracking import Tracker
from tests.tasks.toy_stages import ALPHA, BETA


def _run(root: Path, tracker: Tracker, overrides=()):
    params = load_params(root / "params.yaml", list(overrides))
    parent = tracker.start_pipeline("pipeline", {"x": 1}, {"searchlab.git_commit": "abc"})
    ctx = RunContext(root=root, params=params, tracker=tracker, parent_run_id=parent, flow_run_id="flow-1",
                     git_commit="abc")
    results = {}
    for stage in (ALPHA, BETA):
        results[stage.name] = run_stage(stage, ctx, {n: results[n] for n in stage.upstream})
    tracker.finish_pipeline(parent)
    return parent, results


def test_stage_runs_nested_with_params_metrics_and_cached_link(tmp_path):
    (tmp_path / "params.yaml").write_text("corpus:\n  world:\n    entities: 50\n")
    tracker = Tracker(TrackingParams(experiment="t"), tmp_path)
    assert tracker.uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    first_parent, first = _run(tmp_path, tracker)
    second_parent, _ = _run(tmp_path, tracker)

    client = MlflowClient(tracking_uri=tracker.uri)
    runs = client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{second_parent}'")
    by_stage = {r.data.tags["searchlab.stage"]: r for r in runs}
    assert set(by_stage) == {"alpha", "beta"}
    alpha = by_stage["alpha"]
    assert alpha.data.params["corpus.world.entities"] == "50"
    assert alpha.data.tags["searchlab.cached"] == "true"
    assert alpha.data.tags["searchlab.fingerprint"] == first["alpha"].manifest["fingerprint"]
    assert alpha.data.tags["prefect.flow_run_id"] == "flow-1"
    assert alpha.data.tags["searchlab.git_commit"] == "abc"
    producer = first["alpha"].manifest["mlflow_run_id"]
    assert alpha.data.tags["searchlab.produced_by_run"] == producer
    assert client.get_run(producer).data.tags["mlflow.parentRunId"] == first_parent
    assert client.get_run(producer).data.tags["searchlab.cached"] == "false"
    assert client.get_run(producer).data.metrics["count.items"] == 6
    # the results file's numbers are metrics of the run that made it, and of the cached run that used it
    made = client.get_run(first["beta"].manifest["mlflow_run_id"]).data.metrics
    assert (made["n"], made["threads"]) == (6, 2)
    assert by_stage["beta"].data.metrics["n"] == 6
    beta_producer = first["beta"].manifest["mlflow_run_id"]  # a stage's reports are attached to the run that made them
    assert [a.path for a in client.list_artifacts(beta_producer)] == ["summary.json"]
    assert Path(client.download_artifacts(beta_producer, "summary.json", str(tmp_path))).read_text() == (
        tmp_path / "data/beta/summary.json").read_text()
    curve = client.get_metric_history(beta_producer, "train/loss")
    assert [(m.step, m.value) for m in sorted(curve, key=lambda m: m.step)] == [(1, 2.0), (2, 1.5)]
    assert [(m.step, m.value) for m in client.get_metric_history(beta_producer, "eval/loss")] == [(2, 1.7)]
    # the model stage's folder is a registry version by reference: its path and content hash, no copy
    version = client.get_model_version_by_alias("toy-model", "current")
    assert version.run_id == beta_producer and version.source == (tmp_path / "data/beta").resolve().as_uri()
    assert version.tags["searchlab.content_hash"] == folder_hash(first["beta"].manifest)
    assert version.tags["searchlab.path"] == "data/beta"
    assert len(client.search_model_versions("name='toy-model'")) == 1  # the cached rerun registered nothing new
    assert alpha.info.status == "FINISHED"
