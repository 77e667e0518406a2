"""MLflow tracking for pipeline runs: one parent run per pipeline run, one nested run per stage.

MLflow is driven from a small worker process (``python -m tasks.tracking``)
that the CLI starts first thing (:func:`prestart`): importing MLflow costs ~2 s
of CPU, and in a separate process that runs on the other core while Prefect
starts, instead of holding the GIL of the run itself. The worker uses
:class:`mlflow.MlflowClient` with explicit run ids (MLflow's fluent API keeps
its active run per thread, which breaks under Prefect's worker threads).

Every run records the process that owns it (``searchlab.pid``, ``searchlab.host``, ``searchlab.pid_started``), so
a run whose process was killed before it could close its runs does not stay RUNNING forever: the next
:class:`Tracker` on the same host marks them KILLED (:meth:`_MlflowWriter.recover_killed_runs`). A registered
model version references a content-addressed snapshot of its folder and is checked on loading
(:mod:`tasks.model_store`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from searchlab.config import registry_reference
from searchlab.params import TrackingParams
from tasks.model_store import check_snapshot, snapshot, snapshot_intact, stat_cache, store_dir, weights_hash
from tasks.processes import is_alive, process_identity

log = logging.getLogger("searchlab")


def default_tracking_uri(root: Path) -> str:
    """``sqlite:///<repo>/mlflow.db``: absolute, so runs from any folder land in one store."""
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def tracking_uri(params: TrackingParams, root: Path) -> str:
    return params.mlflow_uri or default_tracking_uri(root)


_started: dict[tuple[str, str, str], subprocess.Popen] = {}


def registered_model_folder(params: TrackingParams, root: Path, name: str, alias: str) -> str:
    """The folder that alias ``alias`` of registered model ``name`` points at, once checked to hold the content
    the version was registered with (its ``searchlab.content_hash`` tag).

    Raises :class:`TrackingError` when the registry does not know the alias, or when the folder is missing or
    its content changed, saying how to get a good version again. A version not registered by searchlab (no
    content hash, or a source that is not a folder) is returned unchecked.
    """
    from urllib.parse import unquote, urlparse

    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        version = MlflowClient(tracking_uri(params, root)).get_model_version_by_alias(name, alias)
    except MlflowException as err:
        raise TrackingError(f"models:/{name}@{alias}: {err.message}") from None
    source = urlparse(version.source)
    if source.scheme != "file":
        return version.source
    folder = Path(unquote(source.path))
    digest = version.tags.get("searchlab.content_hash")
    if digest is None:
        return str(folder)
    problem = check_snapshot(folder, digest, stat_cache(store_dir(root), digest))
    if problem:
        stage = version.tags.get("searchlab.stage") or Path(version.tags.get("searchlab.path", "sft")).name
        by = f" by run {version.run_id}" if version.run_id else ""
        raise TrackingError(
            f"models:/{name}@{alias} is version {version.version} (registered{by} with content {digest[:12]}), "
            f"but its folder no longer holds that content: {problem} (in {folder}). "
            f"Nothing was loaded. To get a good version, re-run the stage that produced it "
            f"(`searchlab run {stage} --force {stage}`, with params that give it the alias {alias}), which "
            f"registers its output again, or point @{alias} at another version.")
    return str(folder)


def evaluate_run(params: TrackingParams, root: Path, run_id: str, what: str = "eval metrics") -> tuple[Any, Any, Any]:
    """``(client, run, evaluate run)``: MLflow run ``run_id``, a pipeline run or an evaluate stage run, and the
    evaluate stage run that holds its results (the run itself, or the pipeline run's evaluate child).

    Raises :class:`TrackingError` saying why (``what`` names the missing thing) when the run does not exist or is
    neither kind.
    """
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    uri = tracking_uri(params, root)
    client = MlflowClient(uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise TrackingError(f"run {run_id}: no such run in {uri}") from None
    stage = run.data.tags.get("searchlab.stage")
    if stage is None:  # a pipeline run: its stages are child runs
        children = client.search_runs(
            [run.info.experiment_id],
            f"tags.`mlflow.parentRunId` = '{run_id}' and tags.`searchlab.stage` = 'evaluate'")
        if not children:
            raise TrackingError(f"run {run_id}: no {what} (a pipeline run without the evaluate stage)")
        return client, run, children[0]
    if stage == "evaluate":
        return client, run, run
    raise TrackingError(f"run {run_id}: no {what} (the {stage} stage's run; give a pipeline run or its evaluate "
                        "stage's run)")


def evaluation_metrics(params: TrackingParams, root: Path, run_id: str) -> tuple[Any, dict[str, float]]:
    """``(run, metrics)``: the evaluation metrics (:func:`searchlab.eval.flat.flat_metrics`'s names) of an MLflow
    run, which is the evaluate stage's run or a pipeline run (whose evaluate stage run holds them).

    Raises :class:`TrackingError` saying why when the run does not exist or holds no evaluation metrics.
    """
    from searchlab.eval.flat import is_eval_metric

    _, run, source = evaluate_run(params, root, run_id)
    metrics = {name: value for name, value in source.data.metrics.items() if is_eval_metric(name)}
    if not metrics:
        raise TrackingError(f"run {run_id}: no eval metrics (its evaluate stage run {source.info.run_id} ended "
                            f"{source.info.status})")
    return run, metrics


def model_folder(source: str, params: TrackingParams, root: Path) -> str:
    """The model folder ``source`` names: for ``models:/NAME@ALIAS`` the registry's folder, else ``source`` itself.

    Raises ValueError for a malformed ``models:/`` reference and :class:`TrackingError` for one the registry
    does not know.
    """
    reference = registry_reference(source)
    return registered_model_folder(params, root, *reference) if reference else source


def prestart(params: TrackingParams, root: Path) -> None:
    """Start the MLflow worker now, so it is ready by the time the first stage logs."""
    _worker(tracking_uri(params, root), params.experiment, root)


def _worker(uri: str, experiment: str, root: Path) -> subprocess.Popen:
    key = (uri, experiment, str(root.resolve()))
    proc = _started.get(key)
    if proc is None or proc.poll() is not None:
        # Its own session: Ctrl-C, which the terminal sends to the run's whole process group, must leave it
        # alive, so the interrupted run can still close its MLflow runs. It ends when its stdin closes, which
        # happens when the run's process ends however it ends (kill -9 included).
        proc = _started[key] = subprocess.Popen(
            [sys.executable, "-m", "tasks.tracking", uri, experiment, str(root.resolve())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
    return proc


class TrackingError(RuntimeError):
    """MLflow refused a write; the message is MLflow's."""


def stopped(error: BaseException) -> bool:
    """Whether ``error`` is a stop rather than a failure: Ctrl-C or the CLI's SIGTERM/SIGHUP (a
    ``KeyboardInterrupt``), or the exception Prefect's flow engine raises on SIGTERM inside a flow run (its
    ``TerminationSignal``: a ``BaseException`` that names the ``signal``)."""
    return isinstance(error, KeyboardInterrupt) or (not isinstance(error, Exception) and hasattr(error, "signal"))


class Tracker:
    """Creates and finishes the MLflow runs of a pipeline run (through the worker process).

    Starting, it first marks KILLED the runs that killed processes on this host left RUNNING (``recovered``
    lists their ids).
    """

    def __init__(self, params: TrackingParams, root: Path):
        self.uri = tracking_uri(params, root)
        self._proc = _worker(self.uri, params.experiment, root)
        self._lock = threading.Lock()  # one request at a time on the pipe
        self.experiment_id: str = self._call("experiment_id")
        self.recovered: list[str] = self._recover()

    def _recover(self) -> list[str]:
        try:
            recovered = self._call("recover_killed_runs")
        except TrackingError as err:  # stale RUNNING runs are untidy, not a reason to fail this run
            log.warning("MLflow: could not look for runs left RUNNING by killed processes: %s", err)
            return []
        if recovered:
            log.warning("MLflow: marked %d run(s) KILLED whose process died without closing them: %s",
                        len(recovered), ", ".join(recovered))
        return recovered

    def start_pipeline(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> str:
        return self._call("start_run", run_name, params, {**tags, **_owner_tags()}, None, None)

    def start_stage(self, parent_run_id: str | None, run_name: str, params: dict[str, Any], tags: dict[str, str],
                    produced_by: str | None = None, origin: dict[str, Any] | None = None) -> str:
        """A stage's run, nested in the pipeline's; a cached stage's names the run that ``produced_by`` its output
        (``origin``: when and from which commit, for a store that does not hold that run)."""
        return self._call("start_run", run_name, params, {**tags, **_owner_tags()}, parent_run_id, produced_by,
                          origin)

    def run_url(self, run_id: str, ui_url: str) -> str:
        """The address of run ``run_id`` in the MLflow UI at ``ui_url``."""
        return f"{ui_url.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{run_id}"

    def share_agents_view(self, metric_names: list[str]) -> None:
        """Add ``metric_names`` (the pipeline runs' EM per suite and agent) to the columns of the experiment's
        :data:`AGENTS_VIEW`, the runs table that :meth:`agents_view_url` opens."""
        self._call("share_agents_view", list(metric_names))

    def agents_view_url(self, ui_url: str) -> str:
        """The experiment's runs table in the MLflow UI at ``ui_url``, as model training, with the agents' EM columns
        (:data:`AGENTS_VIEW`)."""
        return (f"{ui_url.rstrip('/')}/#/experiments/{self.experiment_id}/runs?workflowType=machine_learning"
                f"&viewStateShareKey={AGENTS_VIEW}")

    def finish_stage(self, run_id: str, metrics: dict[str, float] | None = None, status: str = "FINISHED",
                     artifacts: list[str] = (), curves: list[dict] = ()) -> None:
        """Log final metrics, ``curves`` (rows ``{"step": n, name: value}``, e.g. a training log) and
        ``artifacts`` (file paths, e.g. a stage's report), then close the run."""
        self._call("finish_run", run_id, metrics or {}, status, list(artifacts), list(curves))

    def register_model(self, run_id: str, name: str, alias: str, folder: Path, files: dict[str, dict],
                       tags: dict[str, str]) -> str:
        """Make the content of the published output ``folder`` (``files``: its manifest's listing) a version of
        registered model ``name``, point ``alias`` at it, and return the version number.

        The version's source is the content's snapshot (:func:`tasks.model_store.snapshot`; hard links, no
        copy) and its ``searchlab.content_hash`` tag that content's hash. Content the model has a version of
        already gets no second version: ``alias`` moves to the existing one.
        """
        return self._call("register_model", run_id, name, alias, str(folder), files, tags)

    finish_pipeline = finish_stage

    def finish_failed(self, run_id: str, error: BaseException) -> None:
        """Close run ``run_id``, which ``error`` ended: KILLED when it was stopped (:func:`stopped`), else FAILED."""
        self.finish_stage(run_id, status="KILLED" if stopped(error) else "FAILED")

    def _call(self, method: str, *args: Any) -> Any:
        with self._lock:
            if self._proc.poll() is not None:
                raise TrackingError(f"the MLflow worker exited with code {self._proc.returncode}")
            self._proc.stdin.write(json.dumps([method, args]) + "\n")
            line = self._proc.stdout.readline()
        if not line:
            raise TrackingError(f"the MLflow worker stopped (exit code {self._proc.wait()})")
        reply = json.loads(line)
        if "error" in reply:
            raise TrackingError(reply["error"])
        return reply["result"]


def _owner_tags() -> dict[str, str]:
    """The tags that name the process owning a run, for :meth:`_MlflowWriter.recover_killed_runs`."""
    return {"searchlab.pid": str(os.getpid()), "searchlab.host": socket.gethostname(),
            "searchlab.pid_started": process_identity()}


#: The experiment tag MLflow's UI (3.x) reads to open an experiment as model training (runs table, metric charts)
#: instead of GenAI development (traces, an assistant panel), which it infers for an experiment without one.
EXPERIMENT_KIND = "mlflow.experimentKind"
TRAINING_KIND = "custom_model_development"
#: The shared view of the experiment's runs table that shows each pipeline run's EM per suite and agent: MLflow's UI
#: loads the view state (plain JSON: columns, order) from the experiment tag ``mlflow.sharedViewState.<key>`` when the
#: page's address says ``viewStateShareKey=<key>``, as its own Share button does.
AGENTS_VIEW = "agents"
SHARED_VIEW_TAG = "mlflow.sharedViewState."
AGENTS_VIEW_COLUMNS = 60  # of EM metrics at most: the newest runs' first


class _MlflowWriter:
    """The worker's side: the actual MLflow calls."""

    def __init__(self, uri: str, experiment: str, root: Path):
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.root = root
        # Several runs creating a fresh SQLite store at once can fail: serialise creation on a file lock.
        with self._store_lock():
            found = self.client.get_experiment_by_name(experiment)
            self.experiment = found.experiment_id if found else self.client.create_experiment(
                experiment, artifact_location=(root / "mlartifacts").resolve().as_uri(),
                tags={EXPERIMENT_KIND: TRAINING_KIND})
            if found and EXPERIMENT_KIND not in found.tags:  # a store from before: say it once (a user's choice stays)
                self.client.set_experiment_tag(self.experiment, EXPERIMENT_KIND, TRAINING_KIND)

    @contextmanager
    def _store_lock(self) -> Iterator[None]:
        """Hold the project's MLflow lock: one process at a time between a look-up and the write it decides."""
        with open(self.root / "mlflow.db.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def experiment_id(self) -> str:
        return self.experiment

    def share_agents_view(self, metric_names: list[str]) -> None:
        tag = SHARED_VIEW_TAG + AGENTS_VIEW
        with self._store_lock():  # two runs finishing at once each add their columns
            before = self.client.get_experiment(self.experiment).tags.get(tag)
            try:
                shown = [c for c in json.loads(before)["selectedColumns"] if c.startswith("metrics.")] if before else []
            except (ValueError, KeyError, TypeError):
                shown = []  # a view a user edited into something else: start again
            columns = list(dict.fromkeys([*(f"metrics.`{name}`" for name in sorted(metric_names)), *shown]))
            state = {"selectedColumns": ["attributes.`Run Name`", "attributes.`Duration`",
                                         *columns[:AGENTS_VIEW_COLUMNS]],
                     "orderByKey": "attributes.start_time", "orderByAsc": False, "compareRunsMode": "TABLE"}
            self.client.set_experiment_tag(self.experiment, tag, json.dumps(state))

    def recover_killed_runs(self) -> list[str]:
        """Mark KILLED (ended now, with a note saying why) every RUNNING run of the experiment that a process on
        this host owns but that process is gone (or its pid now belongs to another process); return their ids.

        A process killed with SIGKILL, or a machine that went down, never closes its runs; this is the next
        run's cleanup, like the kernel's release of a killed run's stage locks. Runs of other hosts are left
        alone: only their host can tell whether their process lives.
        """
        from mlflow.entities import ViewType

        host = socket.gethostname()
        query = f"attributes.status = 'RUNNING' and tags.`searchlab.host` = '{host}'"
        recovered, token = [], None
        while True:
            page = self.client.search_runs([self.experiment], query, ViewType.ACTIVE_ONLY, max_results=1000,
                                           page_token=token)
            for run in page:
                tags = run.data.tags
                try:
                    pid = int(tags.get("searchlab.pid", ""))
                except ValueError:
                    continue  # not a run this code started
                if is_alive(pid, tags.get("searchlab.pid_started", "")):
                    continue
                now = time.strftime("%Y-%m-%d %H:%M:%S %z")
                note = (f"Recovered: process {pid} on {host} ended without closing this run (killed, or the "
                        f"machine went down). Marked KILLED at {now}, when the next searchlab run on {host} "
                        "started; the end time is that moment, not the moment the process died.")
                before = tags.get("mlflow.note.content")
                self.client.set_tag(run.info.run_id, "mlflow.note.content", f"{before}\n\n{note}" if before else note)
                self.client.set_tag(run.info.run_id, "searchlab.recovered", now)
                self.client.set_terminated(run.info.run_id, status="KILLED")
                recovered.append(run.info.run_id)
            token = page.token
            if not token:
                return recovered

    def start_run(self, name: str, params: dict, tags: dict, parent: str | None, produced_by: str | None,
                  origin: dict | None = None) -> str:
        tags = dict(tags)
        if parent:
            tags["mlflow.parentRunId"] = parent
        if produced_by:
            tags["mlflow.note.content"] = self._producer_note(produced_by, origin or {})
        run_id = self.client.create_run(self.experiment, run_name=name, tags=tags).info.run_id
        self._log(run_id, params=params)
        return run_id

    def _producer_note(self, run_id: str, origin: dict) -> str:
        """The description of a cached stage's run: a link to the run that produced its output, or, when this
        store does not hold that run (the data came with a ``dvc pull`` or a copy), where the output came from."""
        from mlflow.exceptions import MlflowException

        try:
            produced = self.client.get_run(run_id).info.experiment_id
        except MlflowException:
            produced = None
        if produced is not None:
            return (f"Cached: this stage did no work. Its output was produced by run "
                    f"[{run_id}](#/experiments/{produced}/runs/{run_id}).")
        made = ", ".join(f"{label} {origin[key]}" for key, label in (("finished_at", "finished"),
                                                                     ("git_commit", "at commit")) if origin.get(key))
        return (f"Cached: this stage did no work. Its output was produced by run {run_id}, which this MLflow store "
                f"does not hold: the data came from another clone or machine (a `dvc pull`, or a copy)"
                + (f"; {made}" if made else "") + ". The run is in that clone's store.")

    def finish_run(self, run_id: str, metrics: dict, status: str, artifacts: list[str] = (),
                   curves: list[dict] = ()) -> None:
        from mlflow.entities import Metric

        self._log(run_id, metrics=metrics)
        points = [Metric(_curve_name(k), float(v), int(time.time() * 1000), int(row["step"]))
                  for row in curves if "step" in row
                  for k, v in row.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)]
        for start in range(0, len(points), 1000):  # MLflow's batch limit
            self.client.log_batch(run_id, metrics=points[start:start + 1000])
        for path in artifacts:
            self.client.log_artifact(run_id, path)
        self.client.set_terminated(run_id, status=status)

    def register_model(self, run_id: str, name: str, alias: str, folder: str, files: dict, tags: dict) -> str:
        from mlflow.exceptions import MlflowException

        store, weights = store_dir(self.root), weights_hash(files)
        quoted = name.replace("'", "\\'")
        with self._store_lock():  # concurrent runs registering the same content must find each other's version
            try:
                self.client.create_registered_model(name)
            except MlflowException:
                pass  # it exists already
            # the same model (weights, config, tokenizer) under other logs is that version, not a new one
            same = [v for v in self.client.search_model_versions(
                        f"name = '{quoted}' and tags.`searchlab.weights_hash` = '{weights}'")
                    if snapshot_intact(store, v.tags["searchlab.content_hash"])]
            if not same:
                try:
                    target, digest = snapshot(Path(folder), files, store)
                except ValueError as err:
                    raise TrackingError(f"not registered as {name}@{alias}: {err}") from None
                source = target.resolve().as_uri()
                same = [v for v in self.client.search_model_versions(
                            f"name = '{quoted}' and tags.`searchlab.content_hash` = '{digest}'") if v.source == source]
            if same:
                version = min(same, key=lambda v: int(v.version))
            else:
                version = self.client.create_model_version(
                    name, source, run_id=run_id, tags={**tags, "searchlab.content_hash": digest,
                                                       "searchlab.weights_hash": weights})
            self.client.set_registered_model_alias(name, alias, version.version)
        return str(version.version)

    def _log(self, run_id: str, params: dict | None = None, metrics: dict | None = None) -> None:
        from mlflow.entities import Metric, Param

        if params or metrics:
            now = int(time.time() * 1000)
            self.client.log_batch(
                run_id,
                params=[Param(k, "null" if v is None else str(v)) for k, v in (params or {}).items()],
                metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()],
            )


def _curve_name(key: str) -> str:
    """Trainer log keys as MLflow curve names: ``loss`` → ``train/loss``, and the Trainer's evaluation on the
    dev split ``eval_loss`` → ``dev/loss`` (``eval/`` names the benchmark evaluation's results)."""
    return "dev/" + key[len("eval_"):] if key.startswith("eval_") else "train/" + key


def _serve(uri: str, experiment: str, root: str) -> None:
    # Replies go to a private copy of stdout; anything MLflow or alembic prints lands on stderr instead.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        writer, startup_error = _MlflowWriter(uri, experiment, Path(root)), None
    except Exception as err:  # reported on the first request
        writer, startup_error = None, f"{type(err).__name__}: {err}"
    for line in sys.stdin:
        method, args = json.loads(line)
        try:
            reply = {"error": startup_error} if startup_error else {"result": getattr(writer, method)(*args)}
        except Exception as err:  # reported to the caller, which raises it there
            reply = {"error": f"{type(err).__name__}: {err}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve(*sys.argv[1:4])
