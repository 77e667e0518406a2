"""`searchlab serve` against a real Prefect server: scheduled runs fire, and runs may not bring new endpoints."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.conftest import BIN, make_project
from tests.flows.overrides import EVIL  # a solver that would send $SECRET_TOKEN to the requester's URL


@pytest.mark.slow
def test_served_deployment_runs_on_its_schedule_and_refuses_runs_with_new_endpoints(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort, TaskRunSort
    from prefect.exceptions import ObjectNotFound

    project = make_project(tmp_path / "project")
    name = f"every-minute-{os.getpid()}"
    with open(tmp_path / "serve.log", "w") as log:
        serve = subprocess.Popen([str(BIN / "searchlab"), "serve", "corpus", "--cron", "* * * * *", "--name", name,
                                  "--params", "params/smoke.yaml"], cwd=project, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True, env=os.environ.copy())
    try:
        with get_client(sync_client=True) as client:
            deadline = time.time() + 120
            while True:
                try:
                    deployment = client.read_deployment_by_name(f"searchlab-pipeline/{name}")
                    break
                except ObjectNotFound:
                    assert serve.poll() is None and time.time() < deadline, (tmp_path / "serve.log").read_text()
                    time.sleep(0.5)
            evil = client.create_flow_run_from_deployment(deployment.id, parameters={"overrides": [EVIL]})
            # the first run falls on the next minute: up to 60 s away, plus the runner's 10 s polling; on a loaded
            # 2-core machine (the rest of the suite beside it) it once took longer than 180 s
            deadline = time.time() + 300
            while True:
                # limit and sort stated: the sync client sends None for them, which the server refuses (422)
                runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    deployment_id=FlowRunFilterDeploymentId(any_=[deployment.id])), limit=200,
                    sort=FlowRunSort.EXPECTED_START_TIME_ASC)
                scheduled = [run for run in runs if run.auto_scheduled]
                completed = [run for run in scheduled if run.state and run.state.is_completed()]
                evil = client.read_flow_run(evil.id)
                if completed and evil.state.is_final():
                    break
                assert serve.poll() is None and time.time() < deadline, (
                    f"{len(scheduled)} scheduled runs, {len(completed)} completed; the requested run is "
                    f"{evil.state.name}\n" + (tmp_path / "serve.log").read_text())
                time.sleep(1)
            assert completed[0].parameters["stages"] == ["corpus"]
            assert evil.state.is_failed()
            assert "qa.solvers[evil].url: 'http://attacker.invalid/v1' (served: not set)" in evil.state.message
            assert "qa.solvers[evil].api_key_env: 'SECRET_TOKEN' (served: not set)" in evil.state.message
            assert client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[evil.id])), limit=10,
                                         sort=TaskRunSort.ID_DESC) == []  # no stage ran
        assert (project / "data/corpus/manifest.json").exists()  # the scheduled run's work
        assert not (project / "data/index").exists()
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


def test_a_deployment_run_is_checked_against_what_is_served(tmp_path, monkeypatch):
    from flows.serving import SERVED, UntrustedRunError, check_deployment_run, served_record
    from searchlab.params import load_params

    project = make_project(tmp_path / "project")
    with pytest.raises(UntrustedRunError, match="not started by `searchlab serve`"):
        check_deployment_run(project, "params/smoke.yaml", [])
    served_with = ["retriever.url=http://127.0.0.1:8000/retrieve"]
    monkeypatch.setenv(SERVED, served_record(project, "params/smoke.yaml",
                                             load_params(project / "params/smoke.yaml", served_with)))
    check_deployment_run(project, "params/smoke.yaml", served_with)
    check_deployment_run(project, "params/default.yaml", ["corpus.world.seed=3"])  # another file, no endpoints: fine
    with pytest.raises(UntrustedRunError) as refused:
        check_deployment_run(project, "params/smoke.yaml", [EVIL, "retriever.url=http://evil.example/retrieve"])
    assert str(refused.value).splitlines()[1:4] == [
        "  retriever.url: 'http://evil.example/retrieve' (served: 'http://127.0.0.1:8000/retrieve')",
        "  qa.solvers[evil].url: 'http://attacker.invalid/v1' (served: not set)",
        "  qa.solvers[evil].api_key_env: 'SECRET_TOKEN' (served: not set)"]
    (tmp_path / "elsewhere").mkdir()
    make_project(tmp_path / "elsewhere")
    with pytest.raises(UntrustedRunError, match="use the served project"):
        check_deployment_run(tmp_path / "elsewhere", "params/smoke.yaml", [])
    (project / "notes.yaml").write_text("corpus: {}\n")
    for outside in ("notes.yaml", "params/../notes.yaml", "/etc/hostname"):
        with pytest.raises(UntrustedRunError, match="take a params file from"):
            check_deployment_run(project, outside, [])
