"""`searchlab deploy` and `searchlab worker` against a real Prefect server, work pool and worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import BIN, make_project, run_cli
from tests.flows.overrides import EVIL


def _wait_final(client, run_ids, worker: subprocess.Popen, log: Path, timeout_s: float = 150) -> dict:
    """The flow runs, once each is in a final state (fails showing the worker's log if it ends or time runs out)."""
    deadline = time.time() + timeout_s
    while True:
        runs = {run_id: client.read_flow_run(run_id) for run_id in run_ids}
        if all(run.state and run.state.is_final() for run in runs.values()):
            return runs
        states = ", ".join(f"{run.name}: {run.state.name if run.state else None}" for run in runs.values())
        assert worker.poll() is None and time.time() < deadline, f"{states}\n{log.read_text()}"
        time.sleep(0.5)


def _stop(worker: subprocess.Popen) -> None:
    """Ctrl-C, as a terminal sends it: SIGINT to the worker's process group."""
    if worker.poll() is None:
        os.killpg(worker.pid, signal.SIGINT)
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


@pytest.mark.slow
def test_a_deployment_run_is_executed_by_searchlab_worker_and_forged_runs_are_refused(prefect_server, tmp_path):
    from mlflow import MlflowClient
    from prefect.client.orchestration import get_client

    from flows.serving import SERVED, served_record
    from searchlab.params import load_params
    from tasks.registry import STAGES

    project = make_project(tmp_path / "project")
    pool = f"gpu-{os.getpid()}"
    deployed = run_cli(project, "deploy", "corpus", "--pool", pool, "--name", "nightly", "--params",
                       "params/smoke.yaml", timeout=120)
    assert f"deployment searchlab-pipeline/nightly in work pool '{pool}' (created)" in deployed.stdout
    assert f"searchlab worker --pool {pool}" in deployed.stdout

    with get_client(sync_client=True) as client:
        assert client.read_work_pool(pool).type == "process"
        deployment = client.read_deployment_by_name("searchlab-pipeline/nightly")
        assert deployment.work_pool_name == pool
        assert deployment.parameters == {"params_file": "params/smoke.yaml", "overrides": [], "stages": ["corpus"],
                                         "force": []}
        # the UI's form: these four, typed, each with a description; neither root nor record_dvc
        schema = deployment.parameter_openapi_schema["properties"]
        assert list(schema) == ["params_file", "overrides", "stages", "force"]
        assert schema["params_file"]["type"] == "string"
        assert schema["overrides"]["type"] == "array" and schema["overrides"]["items"] == {"type": "string"}
        for name in ("stages", "force"):
            assert schema[name]["type"] == "array"
            assert schema[name]["items"] == {"enum": [stage.name for stage in STAGES], "type": "string"}
        assert all(schema[name]["description"] for name in schema)

        # a stock process worker would take the command, environment and working directory from the run's job
        # variables, and the deployment's code from its pull steps; searchlab worker takes none of them
        pwned = tmp_path / "pwned"
        forged_record = served_record(project, "params/smoke.yaml", load_params(project / "params/smoke.yaml", [EVIL]))
        evil_flow = client.create_flow_from_name("evil")
        evil_deployment = client.create_deployment(
            flow_id=evil_flow, name="evil", entrypoint="evil.py:evil", work_pool_name=pool,
            pull_steps=[{"prefect.deployments.steps.run_shell_script": {"script": f"touch {pwned}"}}])
        runs = {
            "good": client.create_flow_run_from_deployment(deployment.id),
            "forged": client.create_flow_run_from_deployment(
                deployment.id, parameters={"overrides": [EVIL]},
                job_variables={"env": {SERVED: forged_record}, "command": f"touch {pwned}",
                               "working_dir": str(tmp_path)}),
            "root": client.create_flow_run_from_deployment(deployment.id, parameters={"root": "/etc"}),
            "other": client.create_flow_run_from_deployment(evil_deployment),
        }
        log = tmp_path / "worker.log"
        with open(log, "w") as out:
            worker = subprocess.Popen(
                [str(BIN / "searchlab"), "worker", "--pool", pool, "--params", "params/smoke.yaml"], cwd=project,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env=dict(os.environ, PREFECT_WORKER_QUERY_SECONDS="1"))
        try:
            final = _wait_final(client, [run.id for run in runs.values()], worker, log)
            good, forged, root, other = (final[runs[key].id] for key in ("good", "forged", "root", "other"))
            assert good.state.is_completed(), log.read_text()
            assert forged.state.is_failed()
            assert "qa.solvers[evil].url: 'http://attacker.invalid/v1' (served: not set)" in forged.state.message
            assert forged.state.message.count("(served: not set)") == 2  # the url and api_key_env
            assert root.state.is_crashed()
            assert "sets root: runs of the pipeline's deployments take only params_file" in root.state.message
            assert other.state.is_crashed()
            assert "searchlab worker runs only the pipeline's deployments" in other.state.message
            assert "ignores these job variables" in log.read_text() and "command, env, working_dir" in log.read_text()
            assert (project / "data/corpus/manifest.json").exists()  # the good run's work, in the worker's project
            assert not (project / "data/index").exists() and not (tmp_path / "data").exists()

            # stopping the worker ends the run it executes, with every process the run started
            long = client.create_flow_run_from_deployment(deployment.id, parameters={"stages": ["base"]})
            deadline = time.time() + 120
            while not any("pretrain_worker" in _command(child) for child in _descendants(worker.pid)):
                assert worker.poll() is None and time.time() < deadline, log.read_text()
                time.sleep(0.5)
            started = _descendants(worker.pid)
            _stop(worker)
            assert worker.returncode == 0, log.read_text()
            assert "SIGINT: stopping the worker and its 1 running flow run(s)" in log.read_text()
            assert "worker stopped" in log.read_text()
            assert not [child for child in started if _alive(child)]
            # ended, not completed: Crashed by the worker, or Failed when the run's own error handling (its MLflow
            # worker got the SIGTERM too) reported first; the server keeps the first final state
            stopped = client.read_flow_run(long.id).state
            assert stopped.is_crashed() or stopped.is_failed(), stopped
        finally:
            _stop(worker)
    assert not pwned.exists()
    mlflow = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    mlflow_runs = mlflow.search_runs(  # the pipeline's own run (its stage runs carry no params_file tag)
        [e.experiment_id for e in mlflow.search_experiments()],
        f"tags.`prefect.flow_run_id` = '{good.id}' and tags.`searchlab.params_file` = 'params/smoke.yaml'")
    assert len(mlflow_runs) == 1 and mlflow_runs[0].info.status == "FINISHED"
    print(f"\nflow run {good.name} ({good.id}): {good.state.name}; MLflow pipeline run {mlflow_runs[0].info.run_id}; "
          f"schema keys {list(schema)}")


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _command(process: psutil.Process) -> str:
    """A process's command line; empty for one that ended (or is a zombie) while we looked."""
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return ""


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_deploy_and_worker_need_a_running_prefect_server(tmp_path):
    project = make_project(tmp_path / "project")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    for command, what in ((["deploy"], "deploying"), (["worker"], "a worker")):
        failed = run_cli(project, *command, "--pool", "p", "--params", "params/smoke.yaml", env=env, check=False,
                         timeout=60)
        assert failed.returncode == 1
        assert f"error: {what} needs a running Prefect server: start `searchlab ui` first" in failed.stderr
    bad = run_cli(project, "deploy", "nosuch", "--pool", "p", env=env, check=False, timeout=60)
    assert bad.returncode == 2 and "unknown stage(s) nosuch" in bad.stderr
