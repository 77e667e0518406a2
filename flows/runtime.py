"""Process setup for the CLI: where the project is, and how Prefect is configured for it.

Prefect reads its settings from the environment when it is first imported, so
:func:`configure_prefect` must run before anything imports ``prefect``.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

UI_STATE = Path(".searchlab") / "ui.json"


def find_root(start: Path | None = None) -> Path:
    """The project root: the nearest folder at or above ``start`` holding ``params/``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "params").is_dir():
            return folder
    raise SystemExit(f"searchlab: no params/ folder in {here} or above; run inside a searchlab project")


def running_ui(root: Path) -> dict | None:
    """URLs of the servers `searchlab ui` started for this project, if they still answer."""
    try:
        state = json.loads((root / UI_STATE).read_text())
        with urllib.request.urlopen(state["prefect_api_url"] + "/health", timeout=0.5):
            return state
    except (OSError, ValueError, KeyError):
        return None


def configure_prefect(root: Path, api_url: str | None = None) -> str | None:
    """Point Prefect at this project's state folder and server; return the API URL in use (None: temporary server).

    Precedence: an explicit ``api_url`` (params ``runtime.prefect_api_url``), then a
    ``PREFECT_API_URL`` already in the environment, then the server of a running
    ``searchlab ui``; otherwise Prefect starts a temporary local server per run.
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
    if url:
        os.environ["PREFECT_API_URL"] = url
    return url
