"""`searchlab worker`: a Prefect process worker that runs the pipeline's deployments, and nothing else.

A stock process worker runs whatever the Prefect API hands it: the run's job
variables may set its command, environment and working directory, and the
deployment's pull steps and entrypoint say which code it loads. Anyone who can
reach the server could thus run any command on the worker's machine, or put a
forged :data:`flows.serving.SERVED` record in a run's environment and so lift
the check on endpoints and secrets. :class:`SearchlabWorker` takes none of that
from the API. Every run it executes:

- is a run of a deployment whose entrypoint is :data:`flows.deployment.ENTRYPOINT`
  (`searchlab deploy`'s), with no parameter but the flow's own (the server accepts
  others, ``root`` say); any other run in the pool is refused (Crashed, with the reason);
- runs ``python -m prefect.engine`` with the flow loaded from the worker's own
  installed code (``PREFECT__FLOW_ENTRYPOINT``), never the deployment's pull steps
  or storage, also when Prefect looks the flow up for its cancellation and crash hooks;
- runs in the worker's project root, with the worker's environment plus the
  served record of the params the worker was started with: job variables
  (``command``, ``env``, ``working_dir``) are ignored, and a warning in the run's
  log names them.

The flow then checks the run's parameters against that record before any stage
runs (:func:`flows.serving.check_deployment_run`), as under `searchlab serve`.

:meth:`SearchlabWorker.run` is :class:`ProcessWorker`'s own, with the command, environment, working directory and
flow lookup fixed, and each run in a process group of its own so that stopping the worker ends all of it. It
builds on Prefect 3.8's runner modules (``prefect.runner._flow_run_executor``, ``_starter_engine``), private
ones: pyproject.toml keeps Prefect below 3.9, and tests/flows/test_deploy.py runs it against a real server.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from prefect.runner._flow_run_executor import FlowRunExecutionResult, FlowRunExecutorContext
from prefect.runner._starter_engine import EngineCommandStarter
from prefect.utilities.processutils import command_to_string
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker, ProcessWorkerResult

from flows.deployment import ENTRYPOINT, FILE_ENTRYPOINT, PARAMETERS
from flows.serving import SERVED, UntrustedRunError

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun
    from prefect.flows import Flow

HONOURED_JOB_VARIABLES = {"stream_output"}  # the one job variable that changes nothing but where output goes
GRACE_S = 10.0  # seconds a flow run's processes get between SIGTERM and SIGKILL when the worker stops


class SearchlabWorker(ProcessWorker):
    """A process worker for one project: runs `searchlab deploy`'s deployments as the served params allow."""

    @classmethod
    def __dispatch_key__(cls) -> str:
        # Prefect registers each worker class by its key; under `type` ("process", which this worker serves)
        # this one would replace the stock process worker in the registry (with a warning).
        return "searchlab-process"

    def __init__(self, work_pool_name: str, *, root: Path, served: str, **kwargs: Any):
        super().__init__(work_pool_name, **kwargs)
        self.root = root.resolve()
        self.served = served  # flows.serving.served_record(...) of the params this worker was started with
        self._groups: dict[str, int] = {}  # flow run id -> process group of its engine process (and all it starts)
        self._running: dict[str, FlowRun] = {}

    async def run_until_stopped(self, printer: Callable[[str], None] = print) -> None:
        """Poll the pool and execute its runs until SIGINT (Ctrl-C) or SIGTERM, then end the runs in progress.

        Each running flow run's process group gets SIGTERM, and SIGKILL what is left of it after
        :data:`GRACE_S`; the run is reported Crashed (unless the run itself, its MLflow worker signalled too,
        reports Failed first). No process is left behind.
        """
        async with anyio.create_task_group() as group:
            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for signum in signals:
                        name = signal.Signals(signum).name
                        running = [self._running[key] for key in self._groups if key in self._running]
                        printer(f"{name}: stopping the worker"
                                + (f" and its {len(running)} running flow run(s)" if running else ""))
                        for flow_run in running:
                            self.get_flow_run_logger(flow_run).warning(
                                "the searchlab worker executing this run got %s: ending the run's processes", name)
                        await _end_groups(list(self._groups.values()))
                        group.cancel_scope.cancel()
                        return

            group.start_soon(stop_on_signal)
            await self.start(printer=printer)
            group.cancel_scope.cancel()  # the worker ended by itself

    async def run(self, flow_run: FlowRun, configuration: ProcessJobConfiguration,
                  task_status: anyio.abc.TaskStatus[int] | None = None) -> ProcessWorkerResult:
        if task_status is None:
            task_status = anyio.TASK_STATUS_IGNORED
        await self._check_deployment(flow_run)
        ignored = sorted(set(flow_run.job_variables or {}) - HONOURED_JOB_VARIABLES)
        if ignored:
            self.get_flow_run_logger(flow_run).warning(
                "searchlab worker ignores these job variables (a run gets the worker's command, environment and "
                "project root): %s", ", ".join(ignored))
        execution: FlowRunExecutionResult | None = None
        key = str(flow_run.id)
        try:
            async with FlowRunExecutorContext() as ctx:
                starter = EngineCommandStarter(
                    command=command_to_string([sys.executable, "-m", "prefect.engine"]),
                    entrypoint=ENTRYPOINT,  # sets PREFECT__FLOW_ENTRYPOINT: the engine imports our flow, no pull steps
                    cwd=self.root,
                    env={SERVED: self.served},  # on top of this process's environment, which holds the same record
                    stream_output=configuration.stream_output,
                    control_channel=ctx.control_channel,  # graceful cancellation from the UI, as the stock worker's
                    isolate_process_group=True,  # a group of its own: stopped as a whole, never by a stray Ctrl-C
                )
                executor = ctx.create_executor(flow_run, starter, resolve_flow=_local_flow, propose_submitting=False)

                async def execute(*, task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
                    nonlocal execution
                    execution = await executor.submit(task_status=task_status)

                async with anyio.create_task_group() as task_group:
                    handle = await task_group.start(execute)
                    if handle.pid is None:
                        raise RuntimeError("Flow run process has no PID")
                    self._groups[key], self._running[key] = handle.pid, flow_run
                    task_status.started(handle.pid)
        except anyio.get_cancelled_exc_class():  # the worker is stopping: nothing of the run may outlive it
            with anyio.CancelScope(shield=True):
                if key in self._groups:
                    await _end_groups([self._groups[key]])
                    await self._propose_crashed_state(flow_run, "the searchlab worker executing it was stopped")
            raise
        finally:
            self._groups.pop(key, None)
            self._running.pop(key, None)
        if execution is None or execution.status_code is None:
            raise RuntimeError("Failed to start flow run process.")
        return ProcessWorkerResult(status_code=execution.status_code, identifier=str(execution.handle.pid))

    async def _check_deployment(self, flow_run: FlowRun) -> None:
        """Raise :class:`UntrustedRunError` unless ``flow_run`` is a run of a searchlab pipeline deployment."""
        if flow_run.deployment_id is None:
            raise UntrustedRunError(f"flow run {flow_run.name!r} belongs to no deployment: searchlab worker runs only "
                                    "the pipeline's deployments (`searchlab deploy`)")
        deployment = await self.client.read_deployment(flow_run.deployment_id)
        if deployment.entrypoint not in (FILE_ENTRYPOINT, ENTRYPOINT):
            raise UntrustedRunError(f"flow run {flow_run.name!r} is a run of deployment {deployment.name!r} "
                                    f"(entrypoint {deployment.entrypoint!r}): searchlab worker runs only the "
                                    "pipeline's deployments (`searchlab deploy`)")
        unknown = [name for name in flow_run.parameters if name not in PARAMETERS]
        if unknown:  # the server lets a run add parameters the schema does not list (root, record_dvc...)
            raise UntrustedRunError(f"flow run {flow_run.name!r} sets {', '.join(unknown)}: runs of the pipeline's "
                                    f"deployments take only {', '.join(PARAMETERS)}")


async def _end_groups(groups: list[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM each process group, wait until they are empty, SIGKILL what is left after ``grace_s``."""
    for group in groups:
        _signal_group(group, signal.SIGTERM)
    with anyio.move_on_after(grace_s):
        while any(_signal_group(group, 0) for group in groups):
            await anyio.sleep(0.1)
    for group in groups:
        _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, signum: int) -> bool:
    """Send ``signum`` to a process group; False when no process is left in it."""
    try:
        os.killpg(group, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _local_flow(flow_run: FlowRun) -> Flow[..., Any]:
    """The flow Prefect looks up for a run's cancellation and crash hooks: ours, never the deployment's storage."""
    from flows.deployment import deployed_pipeline

    return deployed_pipeline
