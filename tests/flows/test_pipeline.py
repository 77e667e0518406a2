"""The pipeline flow against a real Prefect server, on the seconds-scale profile, with real corpus and index."""

from __future__ import annotations

import json

from tests.conftest import make_project


def _task_states(flow_run_id) -> dict[str, str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                     sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=50)
    return {run.name: run.state.name for run in runs}


def test_pipeline_caches_and_reruns_only_what_changed(prefect_server, tmp_path):
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from flows.pipeline import pipeline

    project = make_project(tmp_path / "project")

    def run(*overrides):
        with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            state = pipeline(params_file="params/smoke.yaml", overrides=list(overrides), root=str(project),
                             return_state=True)
        return state.result(), _task_states(state.state_details.flow_run_id)

    summary, states = run()
    assert {k: v["cached"] for k, v in summary.items()} == {"corpus": False, "index": False}
    assert states == {"corpus": "Completed", "index": "Completed"}
    assert summary["corpus"]["counts"]["passages"] == summary["index"]["counts"]["documents"] > 0

    summary, states = run()
    assert states == {"corpus": "Cached", "index": "Cached"}

    summary, states = run("index.threads=2")
    assert states == {"corpus": "Cached", "index": "Completed"}

    summary, states = run("index.threads=2", "corpus.world.seed=1")
    assert states == {"corpus": "Completed", "index": "Completed"}

    # the effective params are recorded for DVC
    assert "seed: 1" in (project / "params.yaml").read_text()
    manifest = json.loads((project / "data/index/manifest.json").read_text())
    assert manifest["inputs"]["upstream"]["corpus"] == summary["corpus"]["fingerprint"]
