"""Check: `kill -9` (or SIGTERM) of `searchlab run` in each stage, and of `searchlab ui`, leaves no process behind
and no MLflow run RUNNING once the next run has started.

Works in a throwaway copy of the project's params (the installed code runs), with the smoke profile:

    python bench/kill_runs.py [--signal KILL|TERM] [--stages corpus index ...]

For each stage, a run forced to compute it is killed as soon as the stage's scratch folder appears; every
process the run had started (collected just before the kill) must be gone 10 s later. A final, complete run then
recovers the killed runs' MLflow records; none may still be RUNNING.

Output: stdout only: one line per killed stage and one for ``searchlab ui`` (processes seen, still alive
after 10 s), the MLflow runs left RUNNING, then ``summary: N surviving processes, M runs left RUNNING``.
The throwaway project (a temporary folder) is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STAGES = ["corpus", "index", "qa", "benchmarks", "base", "sft", "selfplay", "rl", "evaluate"]


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def survivors(procs: list[psutil.Process], wait_s: float = 10) -> list[str]:
    deadline = time.time() + wait_s
    while True:
        alive = [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.time() > deadline:
            return [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in alive]
        time.sleep(0.2)


def env_without_prefect() -> dict:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_HOME", None)
    return env


def kill_in_stage(project: Path, stage: str, sig: int) -> tuple[int, list[str]]:
    """Start a run that recomputes ``stage``, kill it inside that stage; return (processes seen, survivors)."""
    proc = subprocess.Popen([str(BIN / "searchlab"), "run", stage, "--params", "params/smoke.yaml", "--force", stage],
                            cwd=project, env=env_without_prefect(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    work = project / "data/.work" / stage
    deadline = time.time() + 300
    seen: dict[int, psutil.Process] = {}
    while not list(work.glob("tmp-*")):
        if proc.poll() is not None or time.time() > deadline:
            return 0, [f"run ended (exit {proc.returncode}) before stage {stage} started"]
        for child in descendants(proc.pid):
            seen[child.pid] = child
        time.sleep(0.02)
    # base, sft and rl train in worker processes under `accelerate launch`: kill the run once they train
    until = time.time() + (180 if stage in ("base", "sft", "rl") else 0.1)
    while time.time() < until and proc.poll() is None:
        for child in descendants(proc.pid):
            seen[child.pid] = child
        if any(job in " ".join(child.cmdline()) for child in seen.values() if child.is_running()
               for job in ("sft_worker", "pretrain_worker", "rl.worker")):
            time.sleep(3)
            break
        time.sleep(0.1)
    for child in descendants(proc.pid):
        seen[child.pid] = child
    proc.send_signal(sig)
    proc.wait()
    return len(seen), survivors(list(seen.values()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_ui(project: Path, sig: int) -> tuple[int, list[str]]:
    proc = subprocess.Popen([str(BIN / "searchlab"), "ui", "--prefect-port", str(free_port()), "--mlflow-port",
                             str(free_port())], cwd=project, env=env_without_prefect(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 180
    while not (project / ".searchlab/ui.json").exists():
        if proc.poll() is not None or time.time() > deadline:
            return 0, ["searchlab ui did not start"]
        time.sleep(0.5)
    time.sleep(3)  # MLflow starts its workers
    seen = descendants(proc.pid)
    proc.send_signal(sig)
    proc.wait()
    return len(seen), survivors(seen)


def running_mlflow_runs(project: Path) -> int:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return len(client.search_runs(experiments, "attributes.status = 'RUNNING'"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--signal", choices=["KILL", "TERM"], default="KILL")
    parser.add_argument("--stages", nargs="*", default=STAGES)
    args = parser.parse_args()
    sig = getattr(signal, f"SIG{args.signal}")
    project = Path(tempfile.mkdtemp(prefix="searchlab-kill-"))
    shutil.copytree(ROOT / "params", project / "params")
    env = env_without_prefect()
    subprocess.run([str(BIN / "searchlab"), "run", "--params", "params/smoke.yaml"], cwd=project, env=env,
                   check=True, capture_output=True)
    total_survivors = 0
    for stage in args.stages:
        seen, alive = kill_in_stage(project, stage, sig)
        total_survivors += len(alive)
        print(f"kill -{args.signal} in {stage:<10}: {seen} processes of the run, {len(alive)} alive after 10 s "
              + (f"{alive}" if alive else ""), flush=True)
    seen, alive = kill_ui(project, sig)
    total_survivors += len(alive)
    print(f"kill -{args.signal} of searchlab ui: {seen} processes, {len(alive)} alive after 10 s "
          + (f"{alive}" if alive else ""), flush=True)
    before = running_mlflow_runs(project)
    subprocess.run([str(BIN / "searchlab"), "run", "--params", "params/smoke.yaml"], cwd=project, env=env,
                   check=True, capture_output=True)
    after = running_mlflow_runs(project)
    print(f"MLflow runs RUNNING: {before} before the next run, {after} after it")
    print(f"summary: {total_survivors} surviving processes, {after} runs left RUNNING ({project})")
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
