"""Killed `searchlab run` and `searchlab ui` processes leave no process of theirs running (real kill -9 / SIGTERM)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from flows.runtime import UI_STATE, running_ui
from tests.conftest import BIN, _free_port, make_project


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running: gone and zombie (exited, not yet reaped) processes are not."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    return alive


def _survivors(procs: list[psutil.Process], within_s: float) -> list[str]:
    """The command lines of ``procs`` still running after ``within_s`` seconds (empty as soon as none is)."""
    deadline = time.time() + within_s
    while _alive(procs) and time.time() < deadline:
        time.sleep(0.1)
    survivors = []
    for proc in _alive(procs):
        try:
            survivors.append(" ".join(proc.cmdline()))
        except psutil.NoSuchProcess:
            pass
    return survivors


def _names(procs: list[psutil.Process]) -> list[str]:
    """Short sorted names of processes: ``sleep 300``, ``sh``, a Python module's name."""
    names = []
    for proc in procs:
        try:
            command = proc.cmdline()
        except psutil.NoSuchProcess:
            continue
        if not command:  # a zombie: it has exited, only its record is left to be reaped
            continue
        names.append(command[2] if command[1:2] == ["-m"] else " ".join(command[:2]) if command[0] == "sleep"
                     else command[0])
    return sorted(names)


def _project_env() -> dict[str, str]:
    """The environment of a user's shell: no Prefect server configured, so `searchlab run` starts its own."""
    env = os.environ.copy()
    for name in ("PREFECT_API_URL", "PREFECT_HOME"):  # set by the prefect_server fixture, if a test used it
        env.pop(name, None)
    return env


CALLER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from flows.processes import start_bound
    # a server that forks: one child in its group, one grandchild orphaned inside it
    server = start_bound(["sh", "-c", "sleep 300 & (sleep 301 &); sleep 302"], log=Path(sys.argv[1]))
    print(server.pid, flush=True)
    sys.stdin.readline()
    if sys.argv[2] == "stop":
        server.stop()
        print("stopped", flush=True)
    time.sleep(300)
""")


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "stop"])
def test_a_bound_server_and_what_it_forked_end_with_the_caller(tmp_path, how):
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(tmp_path / "server.log"), how],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        caller.stdout.readline()  # the server's pid: it has started
        # the watchdog, sh and its three sleeps (the orphaned one handed to the watchdog once its subshell exits)
        expected = ["flows.processes", "sh", "sleep 300", "sleep 301", "sleep 302"]
        deadline = time.time() + 10
        while _names(started := _descendants(caller.pid)) != expected:
            assert time.time() < deadline, _names(started)
            time.sleep(0.05)
        caller.stdin.write("go\n")
        caller.stdin.flush()
        if how == "stop":
            assert caller.stdout.readline() == "stopped\n"
            assert _survivors(started, 0) == []  # stop() returns once they are gone
        else:
            caller.send_signal(getattr(signal, how))
            caller.wait()
            assert _survivors(started, 10) == []
        assert "sleep 300" in (tmp_path / "server.log").read_text()  # the header line names the command
    finally:
        caller.kill()
        caller.wait()


def _watchdog(report_read_closed: bool) -> tuple[subprocess.Popen, int, psutil.Process]:
    """A watchdog started by hand as start_bound does; returns it, the lifeline's write end, and its server."""
    lifeline_r, lifeline_w = os.pipe()
    report_r, report_w = os.pipe()
    if report_read_closed:  # the caller is killed before it reads the server's pid
        os.close(report_r)
    watchdog = subprocess.Popen([sys.executable, "-m", "flows.processes", "5", "", str(report_w), "--", "sleep", "300"],
                                stdin=lifeline_r, pass_fds=(report_w,), start_new_session=True)
    os.close(lifeline_r)
    os.close(report_w)
    if not report_read_closed:
        os.close(report_r)
    deadline = time.time() + 10
    while not (children := psutil.Process(watchdog.pid).children()):
        assert time.time() < deadline, "the watchdog started no server"
        time.sleep(0.05)
    return watchdog, lifeline_w, children[0]


def test_a_caller_killed_before_it_learns_the_servers_pid_still_leaves_no_server():
    watchdog, lifeline, server = _watchdog(report_read_closed=True)
    os.close(lifeline)  # the caller is gone
    assert watchdog.wait(timeout=10) == 0
    assert _survivors([server], 5) == []


def test_a_server_whose_watchdog_is_killed_goes_too():
    watchdog, lifeline, server = _watchdog(report_read_closed=False)
    try:
        time.sleep(0.2)  # past the pid report
        watchdog.kill()  # nothing can clean up after a kill -9 of the watchdog but the kernel
        watchdog.wait()
        assert _survivors([server], 5) == []
    finally:
        os.close(lifeline)


def test_a_bound_server_that_exits_reports_its_status(tmp_path):
    from flows.processes import start_bound

    server = start_bound(["sh", "-c", "echo failing; exit 3"], log=tmp_path / "s.log")
    deadline = time.time() + 10
    while server.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert server.poll() == 3
    assert "failing" in (tmp_path / "s.log").read_text()
    server.stop()


@pytest.mark.slow
def test_kill_9_of_searchlab_ui_stops_its_servers_and_its_record_goes_stale(tmp_path):
    project = make_project(tmp_path / "project")
    prefect_port, mlflow_port = _free_port(), _free_port()
    ui = subprocess.Popen([str(BIN / "searchlab"), "ui", "--prefect-port", str(prefect_port),
                           "--mlflow-port", str(mlflow_port)], cwd=project, env=_project_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = ""
        while "Ctrl-C stops both" not in output:
            line = ui.stdout.readline()
            assert line, f"searchlab ui exited ({ui.wait()}):\n{output}"
            output += line
        assert f"{project}/.searchlab/logs/prefect.log, mlflow.log" in output
        assert running_ui(project)["prefect_api_url"] == f"http://127.0.0.1:{prefect_port}/api"
        started = _descendants(ui.pid)
        assert len(started) >= 4  # two watchdogs, the Prefect server, the MLflow server (and its workers)
        ui.kill()
        ui.wait()
        assert _survivors(started, 15) == []
        for port in (prefect_port, mlflow_port):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=1)
        assert (project / UI_STATE).exists()  # nobody removed it...
        assert running_ui(project) is None  # ...but its processes are gone: it is ignored, and deleted
        assert not (project / UI_STATE).exists()
        assert "Uvicorn running" in (project / ".searchlab/logs/mlflow.log").read_text()
    finally:
        ui.kill()
        ui.wait()


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the name http.server calls)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_ui_record_of_dead_processes_is_stale_even_if_its_url_answers(tmp_path):
    """Another server answering on the recorded port (another project's, a leftover one) is not this project's ui."""
    project = make_project(tmp_path / "project")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api"
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        (project / UI_STATE).parent.mkdir()
        record = {"prefect_api_url": url, "prefect_ui_url": "", "mlflow_url": "", "pid": dead.pid,
                  "pids": [os.getpid()]}
        (project / UI_STATE).write_text(json.dumps(record))
        assert running_ui(project) is None
        assert not (project / UI_STATE).exists()
        (project / UI_STATE).write_text(json.dumps(dict(record, pid=os.getpid())))  # all alive: trusted
        assert running_ui(project)["prefect_api_url"] == url
    finally:
        server.shutdown()


def _temporary_server(run: subprocess.Popen, timeout_s: float = 120) -> str:
    """The API URL of the temporary Prefect server a `searchlab run` started, once it answers."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        assert run.poll() is None, "searchlab run ended before its temporary server answered"
        for proc in _alive(_descendants(run.pid)):
            try:
                command = proc.cmdline()
            except psutil.NoSuchProcess:
                continue
            if command[1:3] == ["-m", "uvicorn"] and "prefect.server.api.server:create_app" in command:
                url = f"http://127.0.0.1:{command[command.index('--port') + 1]}/api"
                try:
                    with urllib.request.urlopen(url + "/health", timeout=1):
                        return url
                except OSError:
                    pass
        time.sleep(0.1)
    raise AssertionError("no temporary Prefect server answered")


@pytest.mark.slow
@pytest.mark.parametrize("sig, when", [(signal.SIGKILL, "server up"), (signal.SIGTERM, "indexing"),
                                       (signal.SIGKILL, "between stages")],
                         ids=["kill-9-once-its-server-answers", "sigterm-while-indexing", "kill-9-between-stages"])
def test_killed_searchlab_run_leaves_no_process(tmp_path, sig, when):
    project = make_project(tmp_path / "project")
    run = subprocess.Popen([str(BIN / "searchlab"), "run", "index", "--params", "params/smoke.yaml"], cwd=project,
                           env=_project_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = _temporary_server(run)
        deadline = time.time() + 120
        if when == "indexing":  # the indexer (a JVM) and the MLflow worker run too
            while "searchlab.retrieval.build_worker" not in _names(_descendants(run.pid)):
                assert run.poll() is None and time.time() < deadline, "the indexer never started"
                time.sleep(0.05)
        elif when == "between stages":  # the corpus is published, the index not yet begun
            while not (project / "data/corpus/manifest.json").exists():
                assert run.poll() is None and time.time() < deadline, "the corpus stage never finished"
                time.sleep(0.01)
        started = _descendants(run.pid)
        assert {"flows.processes", "uvicorn"} <= set(_names(started))  # the watchdog and the temporary server
        run.send_signal(sig)  # the run alone, as a user's kill does: not its process group
        run.wait()
        assert _survivors(started, 10) == []
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", int(url.split(":")[-1].split("/")[0])), timeout=1)
    finally:
        run.kill()
        run.wait()


@pytest.mark.slow
def test_a_run_killed_while_it_records_in_dvc_leaves_no_dvc_running(tmp_path):
    """The end of a run: its outputs are recorded in dvc.lock by a `dvc commit` child, which goes with the run."""
    project = make_project(tmp_path / "project", with_code=True)
    env = dict(_project_env(), PYTHONPATH=str(project))
    for command in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"]):
        subprocess.run(command, cwd=project, env=env, check=True, capture_output=True)
    run = subprocess.Popen([str(BIN / "searchlab"), "run", "corpus", "--params", "params/smoke.yaml"], cwd=project,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not any(map(_is_dvc_commit, _descendants(run.pid))):
            assert run.poll() is None and time.time() < deadline, "the run never started dvc commit"
            time.sleep(0.01)
        started = _descendants(run.pid)
        run.kill()
        run.wait()
        assert _survivors(started, 10) == []
        assert not (project / "dvc.lock").exists()  # stopped, not left to finish on its own
    finally:
        run.kill()
        run.wait()


def _is_dvc_commit(proc: psutil.Process) -> bool:
    try:
        command = proc.cmdline()
    except psutil.NoSuchProcess:
        return False
    return "commit" in command and any(Path(part).name == "dvc" for part in command[:2])  # dvc, or python dvc
