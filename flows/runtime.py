"""Process setup for the CLI: where the project is, and how Prefect is configured for it.

Prefect reads its settings from the environment when it is first imported, so
:func:`configure_prefect` must run before anything imports ``prefect``.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import time
import urllib.request
from pathlib import Path

from flows.processes import BoundServer, start_bound
from tasks.processes import is_alive

UI_STATE = Path(".searchlab") / "ui.json"
LOGS = Path(".searchlab") / "logs"
TEMPORARY_SERVER = "SEARCHLAB_PREFECT_TEMPORARY"  # set (to "1") while this process reports to its temporary server


def find_root(start: Path | None = None) -> Path:
    """The project root: the nearest folder at or above ``start`` holding ``params/``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "params").is_dir():
            return folder
    raise SystemExit(f"searchlab: no params/ folder in {here} or above; run inside a searchlab project")


def running_ui(root: Path) -> dict | None:
    """URLs of the servers `searchlab ui` started for this project, if that `searchlab ui` still runs and they answer.

    A record whose processes are gone (its `searchlab ui` was killed) is stale: it
    is deleted, so that no run reports to whatever server answers on its port later.
    """
    path = root / UI_STATE
    try:
        state = json.loads(path.read_text())
        pids = [state["pid"], *state["pids"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(pid, int) and is_alive(pid) for pid in pids):
        path.unlink(missing_ok=True)
        return None
    try:
        with urllib.request.urlopen(state["prefect_api_url"] + "/health", timeout=0.5):
            return state
    except (OSError, ValueError, KeyError):
        return None


def configure_prefect(root: Path, api_url: str | None = None, temporary: bool = True) -> str | None:
    """Point Prefect at this project's state folder and server; return the API URL in use.

    Precedence: an explicit ``api_url`` (params ``runtime.prefect_api_url``), then a
    ``PREFECT_API_URL`` already in the environment, then the server of a running
    ``searchlab ui``; otherwise, with ``temporary``, a temporary server for this
    process (see :func:`start_temporary_server`), else None.
    """
    os.environ.setdefault("PREFECT_HOME", str(root / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "false")
    # The library logs progress notes (resumed shards, skipped records) on "searchlab": show them with the run's logs.
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "searchlab")
    url = api_url or os.environ.get("PREFECT_API_URL")
    if not url:
        ui = running_ui(root)
        url = ui["prefect_api_url"] if ui else None
    if not url and temporary:
        url = start_temporary_server(root)
    if url:
        os.environ["PREFECT_API_URL"] = url
    return url


def start_temporary_server(root: Path) -> str:
    """Start a Prefect API server that lives as long as this process; return its API URL once it answers.

    It is the server Prefect itself would start without ``PREFECT_API_URL`` (the
    same command and settings: the API without the UI, in Prefect's ephemeral
    mode), but Prefect's own is stopped only by an ``atexit`` hook, so every
    killed run left one running. This one is bound to this process by :func:`flows.processes.start_bound`
    and also goes when the process is killed. Its output is appended to
    ``.searchlab/logs/prefect-temporary.log``.
    """
    env = dict(os.environ, PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT__SERVER_FINAL="1")
    env.pop("PREFECT_API_URL", None)
    log = root / LOGS / "prefect-temporary.log"
    timeout_s = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", 120))
    for _ in range(3):  # the free port we picked may be taken before the server binds it
        port = _free_port()
        command = [sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app",
                   "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"]
        # it holds nothing a SIGKILL could spoil (SQLite keeps its journal), so it gets a short grace period
        server = start_bound(command, log=log, env=env, cwd=root, grace_s=5)
        atexit.register(server.stop)
        url = f"http://127.0.0.1:{port}/api"
        if wait_for_health(url + "/health", server, timeout_s):
            os.environ[TEMPORARY_SERVER] = "1"
            return url
        if server.poll() is None:  # still starting after the timeout
            break
    server.stop()
    raise SystemExit(f"searchlab: the temporary Prefect server did not start; its output is in {log}")


def wait_for_health(url: str, server: BoundServer, timeout_s: float) -> bool:
    """Wait until ``url`` answers; False if the server exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
