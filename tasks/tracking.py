"""MLflow tracking for pipeline runs: one parent run per pipeline run, one nested run per stage.

Uses :class:`mlflow.MlflowClient` with explicit run ids rather than MLflow's
fluent API, whose active-run stack is thread-local and would break under
Prefect's worker threads.
"""

from __future__ import annotations

import fcntl
import time
from pathlib import Path
from typing import Any

from searchlab.params import TrackingParams


def default_tracking_uri(root: Path) -> str:
    """``sqlite:///<repo>/mlflow.db``: absolute, so runs from any folder land in one store."""
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def tracking_uri(params: TrackingParams, root: Path) -> str:
    return params.mlflow_uri or default_tracking_uri(root)


class Tracker:
    """Creates and finishes the MLflow runs of a pipeline run."""

    def __init__(self, params: TrackingParams, root: Path):
        from mlflow import MlflowClient  # imported here: ~2 s, paid only by runs that track

        self.uri = tracking_uri(params, root)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_id = self._experiment(params.experiment, root)

    def _experiment(self, name: str, root: Path) -> str:
        # Several runs creating a fresh SQLite store at once can fail: serialise creation on a file lock.
        with open(root / "mlflow.db.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = self.client.get_experiment_by_name(name)
            if found is not None:
                return found.experiment_id
            return self.client.create_experiment(name, artifact_location=(root / "mlartifacts").resolve().as_uri())

    def start_pipeline(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> str:
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        self._log(run.info.run_id, params=params)
        return run.info.run_id

    def start_stage(self, parent_run_id: str | None, stage: str, params: dict[str, Any], tags: dict[str, str],
                    produced_by: str | None = None) -> str:
        tags = dict(tags)
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        if produced_by:
            tags["mlflow.note.content"] = (
                f"Cached: this stage did no work. Its output was produced by run "
                f"[{produced_by}](#/experiments/{self.experiment_id}/runs/{produced_by})."
            )
        run = self.client.create_run(self.experiment_id, run_name=stage, tags=tags)
        self._log(run.info.run_id, params=params)
        return run.info.run_id

    def finish_stage(self, run_id: str, metrics: dict[str, float] | None = None, status: str = "FINISHED") -> None:
        if metrics:
            self._log(run_id, metrics=metrics)
        self.client.set_terminated(run_id, status=status)

    finish_pipeline = finish_stage

    def _log(self, run_id: str, params: dict[str, Any] | None = None, metrics: dict[str, float] | None = None) -> None:
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            params=[Param(k, "null" if v is None else str(v)) for k, v in (params or {}).items()],
            metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()],
        )
