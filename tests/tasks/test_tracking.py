"""MLflow tracking against a real SQLite store in a temp dir: parent run, nested stage runs, cached link, and the
recovery of the runs of a killed pipeline."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient

from searchlab.params import TrackingParams, load_params
from tasks.outputs import content_digest
from tasks.processes import process_identity
from tasks.stage import RunContext, run_stage
from tasks.tracking import Tracker
from tests.conftest import REPO
from tests.tasks.toy_stages import ALPHA, BETA


def _run(root: Path, tracker: Tracker, overrides=()):
    params = load_params(root / "params.yaml", list(overrides))
    parent = tracker.start_pipeline("pipeline", {"x": 1}, {"searchlab.git_commit": "abc"})
    results = {}
    with RunContext(root=root, params=params, tracker=tracker, parent_run_id=parent, flow_run_id="flow-1",
                    git_commit="abc") as ctx:
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
    producer = first["alpha"].record["mlflow_run_id"]
    assert alpha.data.tags["searchlab.produced_by_run"] == producer
    assert client.get_run(producer).data.tags["mlflow.parentRunId"] == first_parent
    assert client.get_run(producer).data.tags["searchlab.cached"] == "false"
    assert client.get_run(producer).data.metrics["counts/items"] == 6
    # the build's CPU time and peak memory: in its record and its run (this test process holds a few hundred MB)
    assert set(first["alpha"].resources) == {"cpu_seconds", "peak_rss_mb", "workers_peak_rss_mb"}
    assert client.get_run(producer).data.metrics["peak_rss_mb"] == first["alpha"].resources["peak_rss_mb"] > 50
    # the results file's numbers are metrics of the run that made it, and of the cached run that used it
    made = client.get_run(first["beta"].record["mlflow_run_id"]).data.metrics
    assert (made["n"], made["threads"]) == (6, 2)
    assert by_stage["beta"].data.metrics["n"] == 6
    beta_producer = first["beta"].record["mlflow_run_id"]  # a stage's reports are attached to the run that made them
    assert [a.path for a in client.list_artifacts(beta_producer)] == ["summary.json"]
    assert Path(client.download_artifacts(beta_producer, "summary.json", str(tmp_path))).read_text() == (
        tmp_path / "data/beta/summary.json").read_text()
    curve = client.get_metric_history(beta_producer, "train/loss")
    assert [(m.step, m.value) for m in sorted(curve, key=lambda m: m.step)] == [(1, 2.0), (2, 1.5)]
    assert [(m.step, m.value) for m in client.get_metric_history(beta_producer, "dev/loss")] == [(2, 1.7)]
    # the model stage's folder is a registry version by content: a snapshot named by its content hash
    version = client.get_model_version_by_alias("toy-model", "current")
    digest = content_digest(first["beta"].manifest["files"])
    assert version.run_id == beta_producer
    assert version.source == (tmp_path / "mlartifacts/models" / digest).resolve().as_uri()
    assert version.tags["searchlab.content_hash"] == digest
    assert version.tags["searchlab.path"] == "data/beta" and version.tags["searchlab.stage"] == "beta"
    assert len(client.search_model_versions("name='toy-model'")) == 1  # the cached rerun registered nothing new
    assert alpha.info.status == "FINISHED"
    assert f"(#/experiments/{tracker.experiment_id}/runs/{producer})" in alpha.data.tags["mlflow.note.content"]
    # a second clone that got the data (dvc pull) but not the MLflow store: the note says where it came from
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copytree(tmp_path / "data", clone / "data", ignore=shutil.ignore_patterns(".work"))
    (clone / "params.yaml").write_text((tmp_path / "params.yaml").read_text())
    other = Tracker(TrackingParams(experiment="t"), clone)
    parent, _ = _run(clone, other)
    cached = {r.data.tags["searchlab.stage"]: r for r in MlflowClient(other.uri).search_runs(
        [other.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")}["alpha"]
    note = cached.data.tags["mlflow.note.content"]
    assert f"produced by run {producer}, which this MLflow store does not hold" in note
    assert first["alpha"].record["finished_at"] in note and "#/experiments" not in note
    # every run names the process that owns it, so a run of a killed process can be told apart later
    for run in (alpha, client.get_run(second_parent)):
        assert run.data.tags["searchlab.pid"] == str(os.getpid())
        assert run.data.tags["searchlab.host"] == socket.gethostname()
        assert run.data.tags["searchlab.pid_started"] == process_identity()


# Creates a pipeline run and a stage run through the Tracker, says their ids, and waits to be killed.
_KILLED_RUN = """
import json, sys, time
from pathlib import Path
from searchlab.params import TrackingParams
from tasks.tracking import Tracker

tracker = Tracker(TrackingParams(experiment="t"), Path(sys.argv[1]))
parent = tracker.start_pipeline("pipeline", {}, {})
stage = tracker.start_stage(parent, "alpha", {}, {"searchlab.stage": "alpha"})
print(json.dumps([parent, stage]), flush=True)
time.sleep(600)
"""


def test_runs_of_a_killed_pipeline_are_marked_killed_by_the_next_tracker(tmp_path):
    tracker = Tracker(TrackingParams(experiment="t"), tmp_path)
    live = tracker.start_pipeline("live", {}, {})  # this test process's: it lives on, so must its run
    client = MlflowClient(tracking_uri=tracker.uri)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    parent, stage = json.loads(line)
    dead_pid = proc.pid
    # this process's pid, recorded by an earlier process that had it: the pid lives, that process does not
    reused = client.create_run(tracker.experiment_id, tags={
        "searchlab.pid": str(os.getpid()), "searchlab.host": socket.gethostname(),
        "searchlab.pid_started": "another-boot:1"}).info.run_id
    # a run of another machine: only that machine can tell whether its process lives
    elsewhere = client.create_run(tracker.experiment_id, tags={
        "searchlab.pid": str(dead_pid), "searchlab.host": "another-host", "searchlab.pid_started": ""}).info.run_id
    assert {client.get_run(r).info.status for r in (parent, stage)} == {"RUNNING"}

    recovering = Tracker(TrackingParams(experiment="t"), tmp_path)

    assert sorted(recovering.recovered) == sorted([parent, stage, reused])
    for run_id in (parent, stage, reused):
        run = client.get_run(run_id)
        assert run.info.status == "KILLED" and run.info.end_time is not None
        assert "searchlab.recovered" in run.data.tags
        assert run.data.tags["mlflow.note.content"].startswith("Recovered: process ")
    assert client.get_run(parent).data.tags["searchlab.pid"] == str(dead_pid)
    assert client.get_run(stage).data.tags["mlflow.parentRunId"] == parent
    assert client.get_run(live).info.status == "RUNNING"
    assert client.get_run(elsewhere).info.status == "RUNNING"
    assert Tracker(TrackingParams(experiment="t"), tmp_path).recovered == []  # nothing twice
