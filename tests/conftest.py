"""Shared fixtures: a real Prefect server for the session, and throwaway copies of the project."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory) -> str:
    """A real `prefect server start` on 127.0.0.1 with its own state folder; its API URL is exported.

    Prefect reads its settings when first imported, so tests import Prefect-using
    modules only after requesting this fixture.
    """
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = dict(os.environ, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"prefect server did not start (exit code {proc.poll()})")
            time.sleep(0.3)
    os.environ.update(PREFECT_API_URL=url, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_RESULTS_PERSIST_BY_DEFAULT="false")
    yield url
    if "prefect" in sys.modules:  # send the last run logs before the server goes away
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=5)
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def make_project(dest: Path, with_code: bool = False) -> Path:
    """A throwaway searchlab project: params/ (and, for DVC tests, the code and DVC config) under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "params", dest / "params")
    if with_code:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for package in ("searchlab", "tasks", "flows"):
            shutil.copytree(REPO / package, dest / package, ignore=ignore)
        for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
            shutil.copy2(REPO / name, dest / name)
    return dest


def processes_running(needle: str) -> list[int]:
    """Pids whose command line mentions ``needle`` (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:  # the process ended while we looked
            pass
    return found


def run_cli(project: Path, *args: str, timeout: float = 300, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
    """Run the real `searchlab` CLI in ``project``."""
    proc = subprocess.run([str(BIN / "searchlab"), *args], cwd=project, capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy())
    if check and proc.returncode != 0:
        raise AssertionError(f"searchlab {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def pytest_collection_modifyitems(items):
    """A test that needs the Prefect server is ``slow`` (the server takes seconds to start, once per session), as is
    one whose setup and call took 5 s or more in a full run on a 2-core machine (marked where it is written)."""
    for item in items:
        if "prefect_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
