"""A pipeline run's names and addresses: its MLflow run and its Prefect flow run point at each other.

The MLflow run gets a name a person can tell apart from the others (params
file, overrides, a short hash of the effective params), MLflow's own source and
user tags, and a description linking the Prefect flow run; the Prefect flow run
gets a link artifact to the MLflow run and tags naming the params file and the
stages.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from flows.runtime import TEMPORARY_SERVER, running_ui

MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"  # where `searchlab ui` serves MLflow unless told otherwise
NAME_OVERRIDES_CHARS = 80  # of a run name; the full overrides are the run's searchlab.overrides tag


def params_hash(params: dict[str, Any]) -> str:
    """Eight hex digits that change whenever any effective param does."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_name(params_file: str, overrides: list[str], params: dict[str, Any]) -> str:
    """``default · sft.learning_rate=0.001 · 3f2a9c1e``: the params file's stem, the overrides (shortened), the
    params hash; two runs with the same name ran the same params."""
    return " · ".join(part for part in (Path(params_file).stem, _shortened(overrides), params_hash(params)) if part)


def _shortened(overrides: list[str] | None) -> str:
    """The overrides as a run name shows them: joined, cut at :data:`NAME_OVERRIDES_CHARS`."""
    shown = " ".join(overrides or [])
    return shown if len(shown) <= NAME_OVERRIDES_CHARS else shown[:NAME_OVERRIDES_CHARS - 1] + "…"


def prefect_flow_run_url(flow_run_id: str | None) -> str | None:
    """The flow run's page in the Prefect UI of the server this process reports to, or None without a server."""
    api = os.environ.get("PREFECT_API_URL")
    if not flow_run_id or not api:
        return None
    ui = os.environ.get("PREFECT_UI_URL") or api.rstrip("/").removesuffix("/api")
    return f"{ui}/runs/flow-run/{flow_run_id}"


def mlflow_ui_url(root: Path, tracking_uri: str) -> str:
    """The MLflow UI that shows this project's runs: a tracking server's own address, the running `searchlab ui`'s,
    or the one `searchlab ui` starts by default."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri
    ui = running_ui(root)
    return ui["mlflow_url"] if ui else MLFLOW_UI_DEFAULT


def mlflow_tags(commit: str, flow_run_id: str | None, flow_run_name: str | None) -> dict[str, str]:
    """MLflow's own source and user tags, and the run's description: a link to its Prefect flow run."""
    url = prefect_flow_run_url(flow_run_id)
    if url is None:
        note = "Not run through Prefect."
    elif os.environ.get(TEMPORARY_SERVER):
        note = (f"Prefect flow run {flow_run_name} ({flow_run_id}) ran on a temporary Prefect server that ended "
                f"with the run; start `searchlab ui` before `searchlab run` to keep flow runs browsable.")
    else:
        note = f"Prefect flow run: [{flow_run_name or flow_run_id}]({url})"
    return {"mlflow.note.content": note, "mlflow.user": getpass.getuser(),
            "mlflow.source.type": "JOB", "mlflow.source.name": "searchlab-pipeline (flows/pipeline.py)",
            "mlflow.source.git.commit": commit.removesuffix("-dirty")}


def link_flow_run(flow_run_id: str | None, mlflow_url: str, name: str, params_file: str, targets: list[str]) -> None:
    """Give the Prefect flow run a link artifact to its MLflow run and tags naming its params file and the stages it
    was asked for (``targets``; a tag per stage it ran would overflow the run list's row and hide the params tag)."""
    if not flow_run_id:
        return
    from prefect.artifacts import create_link_artifact
    from prefect.client.orchestration import get_client

    create_link_artifact(link=mlflow_url, link_text=f"MLflow run {name}", key="mlflow-run",
                         description="This pipeline run's parent run in MLflow: params, stage runs, results.")
    with get_client(sync_client=True) as client:
        tags = set(client.read_flow_run(flow_run_id).tags) | {params_tag(params_file)}
        client.update_flow_run(flow_run_id, tags=sorted(tags | {f"stage:{name}" for name in targets}))


def params_tag(params_file: str) -> str:
    """The Prefect tag naming a run's params file (``params:smoke.yaml``)."""
    return f"params:{Path(params_file).name}"


def flow_run_name(params_file: str, overrides: list[str] | None, stages: list[str] | None) -> str:
    """``smoke · evaluate`` (``smoke · rl.steps=4 · rl``): the params file's stem, the overrides (shortened) and the
    stages asked for, so that Prefect's run list tells runs apart (the MLflow run adds the params hash)."""
    parts = (Path(params_file).stem, _shortened(overrides), " ".join(stages or ["evaluate"]))
    return " · ".join(part for part in parts if part)
