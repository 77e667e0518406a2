"""Run a training job under ``accelerate launch``: one process per device, DeepSpeed or FSDP by accelerate config.

The stage process never trains in-process: :func:`launch` writes the job (a
:class:`Job` record of the worker's kind, e.g. :class:`searchlab.rl.train.RLJob`)
as JSON, starts ``accelerate launch -m <worker module> <job file>`` and waits;
the worker reads it back with :func:`run_job`, which validates it as that kind.
The single-CPU demo and an 8-GPU DeepSpeed run take the same path; only
``num_processes`` and the accelerate config file differ. (Where accelerate
would start a single process, :func:`launch` starts it itself, with the command
and environment accelerate builds for it: :func:`one_worker`.)

A worker must die with the process that launched it: a ``kill -9`` of the stage
would otherwise leave it training (and writing checkpoints) while a rerun
resumes from the same folder. The launcher's stdin is a pipe whose write end
only the stage process holds; every worker process inherits it, and a worker
whose job says ``exit_with_launcher`` calls :func:`exit_with_launcher`, which
ends it when the pipe reaches end-of-file.

A worker's ``searchlab`` log records (e.g. RL's ``rl: step k/N … ETA``) reach
the launching process: :func:`run_job` writes the main process's to
``job.progress``, and :func:`launch` re-logs each line there under its
logger's name, so they show on the console and in Prefect like the stage's own.

A worker that fails says why: :func:`run_job` writes the traceback of the
exception that ends it to ``job.error``, and :class:`LaunchError` carries
its last lines, so a stage's failure names the real cause (a bad demos file, a
full disk) rather than only accelerate's exit status.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from searchlab.files import is_no_space
from searchlab.progress import quiet_libraries

ERROR_LINES = 20  # of the worker's traceback in a LaunchError: its innermost frames and the exception


def vllm_problem(wanted: bool) -> str | None:
    """The one rule of what vLLM rollouts need of this machine, read by the stages and by the plan: None when
    they are not ``wanted`` or can run, else the problem (no CUDA GPU)."""
    if not wanted:
        return None
    import torch

    return None if torch.cuda.is_available() else "vLLM needs a CUDA GPU, and this machine has none"


def check_device(use_vllm: bool, key: str) -> None:
    """Refuse, naming the key (``rl.use_vllm``, ``selfplay.use_vllm``), what this machine cannot do: vLLM rollouts
    without CUDA (:func:`vllm_problem`)."""
    problem = vllm_problem(use_vllm)
    if problem:
        raise ValueError(f"{key}: {problem}; set {key}: false")


class LaunchError(RuntimeError):
    """A launched training job failed; the message names its exit status, the worker's exception and the command."""


class Job(BaseModel):
    """The job file a worker reads: the fields :func:`launch` sets, which :func:`run_job` follows.

    Each kind of job is a subclass that names its own fields (the params
    sections it trains with, its folders and files), so they are typed and
    validated once, where the stage builds the record; the worker reads the
    same record back (:func:`run_job`). A record's creator leaves these four
    fields unset: :func:`launch` fills them in.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    result: Path | None = None  # the figures the worker's main process writes when it succeeds (JSON)
    error: Path | None = None  # the traceback of a worker that fails
    progress: Path | None = None  # the main process's searchlab log records, one per line (LOG_FIELDS)
    exit_with_launcher: bool = False  # end the worker when the launching process is gone (exit_with_launcher())


JobT = TypeVar("JobT", bound=Job)


def launch(module: str, job: Job, job_dir: Path, num_processes: int | None = None,
           config_file: str | None = None) -> dict[str, Any]:
    """Run ``python -m module JOB_FILE`` as ``accelerate launch`` runs it; return what the job wrote to ``job.result``.

    ``job`` is written to ``job_dir/job.json`` with ``result`` set to
    ``job_dir/result.json``, which the worker's main process writes when it
    succeeds, and ``error`` to ``job_dir/error.txt``, where :func:`run_job`
    writes the traceback of a worker that fails; a failure raises
    :class:`LaunchError` with that traceback's last lines. ``config_file`` is an
    accelerate config (``accelerate config`` writes one; DeepSpeed and FSDP are
    set there); ``num_processes`` overrides
    its process count. Without a config: ``num_processes``, or one process per
    visible GPU (one on a CPU); several start through torchrun
    (:func:`distributed_options`), on a CPU too (joined with gloo). A single
    worker is started directly, as accelerate would start it (:func:`one_worker`).
    The workers' output goes to this process's stdout/stderr.
    """
    job_dir.mkdir(parents=True, exist_ok=True)
    result, error, progress = job_dir / "result.json", job_dir / "error.txt", job_dir / "progress.log"
    no_space = error.with_suffix(NO_SPACE_SUFFIX)
    for stale in (result, error, progress, no_space):
        stale.unlink(missing_ok=True)
    job_file = job_dir / "job.json"
    job_file.write_text(job.model_copy(update={"result": result, "error": error, "progress": progress,
                                               "exit_with_launcher": True}).model_dump_json(indent=1))
    options = [*_launch_options(num_processes, config_file), "-m", module, str(job_file)]
    quiet_libraries()  # before the workers import datasets and transformers: they inherit the switches
    command, env = one_worker(options) or ([sys.executable, "-m", "accelerate.commands.launch", *options], None)
    # stdin: the pipe workers watch (see the module docstring); we never write to it
    process = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    done = threading.Event()
    # in this thread's context: a stage's run context (Prefect's) then files the relayed lines under its run
    relay = threading.Thread(target=contextvars.copy_context().run, args=(_relay_logs, progress, done),
                             name="worker-logs", daemon=True)
    relay.start()
    try:
        status = process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        process.stdin.close()
        done.set()
        relay.join(timeout=5)
    if status != 0 or not result.is_file():
        _raise_failure(job_file, status, command)
    return json.loads(result.read_text())


def _launch_options(num_processes: int | None, config_file: str | None) -> list[str]:
    """``accelerate launch``'s options: the config file's (its process count overridden by ``num_processes``), or
    ``num_processes`` (else one per visible GPU, one on a CPU) with accelerate's defaults stated."""
    if config_file:
        return ["--config_file", str(config_file)] + (["--num_processes", str(num_processes)] if num_processes
                                                      else [])
    # accelerate's defaults, stated so it does not warn about each; the Trainer sets mixed precision itself
    processes = num_processes or _gpu_count() or 1
    options = ["--num_processes", str(processes), "--num_machines", "1", "--mixed_precision", "no",
               "--dynamo_backend", "no",
               # accelerate's own default is one thread per process, which halves CPU training on two cores
               "--num_cpu_threads_per_process", str(max(1, _cpu_threads() // processes))]
    return options + (distributed_options() if processes > 1 else [])


def _raise_failure(job_file: Path, status: int, command: list[str]) -> None:
    """Raise the :class:`LaunchError` of a failed job: the worker's last traceback lines (``error.txt``), from the
    disk error when the worker ran out of space."""
    job_dir = job_file.parent
    error, no_space = job_dir / "error.txt", (job_dir / "error.txt").with_suffix(NO_SPACE_SUFFIX)
    cause = ("\n".join(error.read_text().splitlines()[-ERROR_LINES:]) if error.is_file()
             else "the worker left no error report (killed, or it failed before running the job); see its output")
    failure = LaunchError(f"training job {job_file} failed (exit status {status}):\n{cause}\n"
                          f"command: {' '.join(command)}")
    if no_space.exists():  # raised from the disk error, so the caller's one-line message names the folder
        raise failure from OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(job_dir))
    raise failure


def one_worker(launch_args: list[str]) -> tuple[list[str], dict[str, str]] | None:
    """The command and environment with which ``accelerate launch launch_args`` would start a single worker process
    itself, so that :func:`launch` starts it directly; None where accelerate would start several, or use DeepSpeed,
    FSDP or another launcher (its own config file may ask for them).

    accelerate's simple launcher is a Python process that only starts that one
    worker and waits for it: it took 2 s to start in every training stage and
    held 290 MB beside the worker (measured: docs/results/demo-cost.md). The
    command and environment are accelerate's own (its argument checks and its
    ``prepare_simple_launcher_cmd_env``), so the worker runs as under the launcher.
    """
    from accelerate.commands.config.config_args import ComputeEnvironment
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env

    args, defaults, _ = _validate_launch_command(launch_command_parser().parse_args(launch_args))
    distributed = any(getattr(args, flag) for flag in ("use_deepspeed", "use_fsdp", "use_megatron_lm", "multi_gpu",
                                                        "tpu"))
    if (distributed and not args.cpu) or (defaults is not None and
                                          defaults.compute_environment == ComputeEnvironment.AMAZON_SAGEMAKER):
        return None  # the branches of accelerate's launch_command before its simple launcher
    return prepare_simple_launcher_cmd_env(args)


NO_SPACE_SUFFIX = ".no-space"  # beside job.error: the worker failed because a disk filled up

LOG_FIELDS = "%(name)s\t%(levelno)s\t%(message)s"  # one worker log record per line of job.progress


class _OneLineFormatter(logging.Formatter):
    """:data:`LOG_FIELDS` with the record's line breaks (a traceback, a multi-line message) made visible marks."""

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", " ⏎ ")


def _relay_logs(path: Path, done: threading.Event) -> None:
    """Re-log the worker records :func:`run_job` writes to ``path`` until ``done`` is set and all are read."""
    position = 0
    while True:
        finished = done.is_set()
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                f.seek(position)
                for line in iter(f.readline, ""):
                    if not line.endswith("\n"):  # a line still being written: read it whole next time
                        break
                    position += len(line.encode("utf-8"))
                    name, level, message = (line.rstrip("\n").split("\t", 2) + ["", ""])[:3]
                    logging.getLogger(name).log(int(level) if level.isdigit() else logging.INFO, message)
        if finished:
            return
        done.wait(0.5)


def run_job(main: Callable[[JobT], None], job_file: str, kind: type[JobT] = Job) -> None:
    """What a worker module runs as ``__main__``: ``main(job)`` for the job :func:`launch` wrote to ``job_file``.

    ``job`` is the file read back as a ``kind`` record (``kind.model_validate_json``).
    Follows ``exit_with_launcher``; if ``main`` raises (or the file is not a
    valid ``kind``), the traceback goes to ``job.error`` before the exception
    ends the process. Of several processes that fail, the first to write is
    kept: the others usually fail because it did (a collective operation whose
    peer is gone).
    """
    text = Path(job_file).read_text()
    # the launcher's fields first, so that a record that fails to validate is reported like any failure
    fields = json.loads(text)
    launcher = Job.model_validate({name: fields[name] for name in Job.model_fields if name in fields})
    if launcher.exit_with_launcher:
        exit_with_launcher()
    if launcher.progress and os.environ.get("RANK", "0") == "0":
        # the main process's searchlab records go to the launcher (see _relay_logs); line-buffered, so each
        # record is whole in the file as soon as it is written
        handler = logging.StreamHandler(open(launcher.progress, "a", encoding="utf-8", buffering=1))
        handler.setFormatter(_OneLineFormatter(LOG_FIELDS))
        package = logging.getLogger("searchlab")
        package.addHandler(handler)
        package.setLevel(logging.INFO)
    try:
        job = kind.model_validate_json(text)
        with _profiled():
            main(job)
    except BaseException as err:
        if launcher.error and is_no_space(err):
            try:  # an empty file: it needs no free block, where the report below may find none
                launcher.error.with_suffix(NO_SPACE_SUFFIX).touch()
            except OSError:
                pass
        if launcher.error:
            try:
                with open(launcher.error, "x") as f:
                    f.write(traceback.format_exc())
            except OSError:  # another process's report is there already, or the disk is full: the output still has it
                pass
        raise


@contextlib.contextmanager
def _profiled():
    """cProfile around the block when ``SEARCHLAB_PROFILE`` names a path prefix (``bench/profile_stage.py`` sets
    it): each process writes ``<prefix>-rank<N>.prof``; otherwise nothing."""
    prefix = os.environ.get("SEARCHLAB_PROFILE")
    if not prefix:
        yield
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        profiler.dump_stats(f"{prefix}-rank{os.environ.get('RANK', '0')}.prof")


def world_size() -> int:
    """The processes of the job this worker belongs to (torchrun's ``WORLD_SIZE``; 1 outside a launch).

    Read from the environment, not from accelerate's state, which would start
    the process group before the Trainer's arguments set its backend.
    """
    return int(os.environ.get("WORLD_SIZE", "1"))


def distributed_options() -> list[str]:
    """The ``accelerate launch`` options that start several processes on one machine without a config file.

    ``--multi_gpu`` is accelerate's name for its torchrun launcher, which starts
    ``--num_processes`` processes on GPUs and CPUs alike; without it accelerate
    starts one process on a machine without GPUs (it expects ``mpirun`` for
    several CPU processes), which would train alone while its figures claimed
    more. On a CPU the processes join with gloo (the Trainer's ``use_cpu``).
    The rendezvous port is a free one, so that two launches at once (two
    stages, two test runs) do not meet on accelerate's default 29500.
    """
    return ["--multi_gpu", "--main_process_port", str(_free_port())]


def _free_port() -> int:
    """A TCP port on this machine that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def _cpu_threads() -> int:
    """The threads this process's torch computes with (the cores, or OMP_NUM_THREADS when set)."""
    import torch

    return torch.get_num_threads()


def exit_with_launcher() -> None:
    """End this worker process as soon as the process that launched the job is gone (stdin reaches end-of-file)."""

    def watch() -> None:
        # the raw descriptor, not sys.stdin: a daemon thread blocked inside a buffered reader holds its lock and
        # aborts the interpreter's shutdown when the job ends normally
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os._exit(137)  # no cleanup: the launcher was killed, and so is its job

    threading.Thread(target=watch, name="exit-with-launcher", daemon=True).start()
