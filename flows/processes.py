"""Start servers that cannot outlive the process that started them, however it ends.

:func:`start_bound` starts a small watchdog (``python -m flows.processes``),
which starts the server command in a session of its own (so one process group
holds the server and every process it forks) and then waits on a pipe whose
write end only the caller holds. When the caller ends in any way, returning,
raising, SIGTERM or ``kill -9``, the kernel closes that end, the watchdog reads
end-of-file and stops the server's whole process group (SIGTERM, then SIGKILL
after a grace period) before it exits itself. The watchdog has a session of its
own too, so a signal sent to the caller's process group (Ctrl-C, ``kill -9
-PGID``) cannot take it down before it has done its job.

The watchdog, not the caller, is the server's parent: it can wait for it, and it
exits with the server's status if the server stops by itself, so the caller's
handle on the watchdog says whether the server still runs.

>>> server = start_bound(["python", "-m", "http.server", "8123"], log=Path("http.log"))  # doctest: +SKIP
>>> server.pid, server.poll()  # doctest: +SKIP
(41235, None)
>>> server.stop()  # doctest: +SKIP
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tasks.processes import ends_with_this_process

GRACE_S = 10.0  # seconds a server gets between SIGTERM and SIGKILL


class BoundServer:
    """A server started by :func:`start_bound`: its pid, whether it still runs, and how to stop it."""

    def __init__(self, watchdog: subprocess.Popen, lifeline: int, pid: int, log: Path | None):
        self.watchdog = watchdog
        self.pid = pid  # the server's own pid (and process group id)
        self.log = log
        self._lifeline = lifeline  # the pipe's write end; closing it tells the watchdog to stop the server

    def poll(self) -> int | None:
        """None while the server runs; else its exit status."""
        return self.watchdog.poll()

    @property
    def returncode(self) -> int | None:
        return self.watchdog.returncode

    def release(self) -> None:
        """Tell the watchdog to stop the server (and everything it started) now, without waiting for it."""
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1

    def stop(self, timeout: float = GRACE_S + 5) -> None:
        """Stop the server and everything it started; return when they are gone (or ``timeout`` has passed)."""
        self.release()
        try:
            self.watchdog.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # the watchdog itself hangs: end it, and the group by hand
            _kill_group(self.pid, signal.SIGKILL)
            self.watchdog.kill()
            self.watchdog.wait()


def stop_all(servers: list[BoundServer]) -> None:
    """Stop several servers at once (they shut down in parallel)."""
    for server in servers:
        server.release()
    for server in servers:
        server.stop()


def start_bound(command: list[str], log: Path | None = None, env: dict[str, str] | None = None,
                cwd: str | Path | None = None, grace_s: float = GRACE_S) -> BoundServer:
    """Start ``command`` so that it, and every process it starts, ends when the calling process ends.

    Its stdout and stderr are appended to ``log`` after a line naming the command
    (None: discarded). ``grace_s`` is how long the server gets to stop on SIGTERM
    before SIGKILL. Raises OSError if the command cannot be started.
    """
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()  # not inheritable: no other child of the caller keeps the pipe open
    report_r, report_w = os.pipe()
    args = [sys.executable, "-m", "flows.processes", str(grace_s), str(log or ""), str(report_w), "--", *command]
    try:
        watchdog = subprocess.Popen(args, stdin=read_end, stdout=subprocess.DEVNULL, env=env, cwd=cwd,
                                    pass_fds=(report_w,), start_new_session=True)
    except BaseException:
        os.close(write_end)
        os.close(report_r)
        raise
    finally:
        os.close(read_end)
        os.close(report_w)
    with os.fdopen(report_r) as report:  # the server's pid, or an empty line if it could not start
        line = report.readline().strip()
    if not line:
        os.close(write_end)
        watchdog.wait()
        raise OSError(f"could not start {command[0]} (see {log})" if log else f"could not start {command[0]}")
    return BoundServer(watchdog, write_end, int(line), log)


def _kill_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):  # gone (or the id now belongs to someone else's group)
        return False


def _become_subreaper() -> None:
    """Have orphaned descendants of the server handed to this process (Linux), so that they can be reaped.

    Without it, a server's child that outlives the server goes to PID 1, which in
    some containers never reaps it: its zombie keeps the group "alive" forever.
    """
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap(server: subprocess.Popen) -> None:
    """Collect every exited child (the server and orphans handed to us), recording the server's status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == server.pid:
            server.returncode = os.waitstatus_to_exitcode(status)


def _stop_group(server: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the server's group, wait until it is empty, SIGKILL what is left after ``grace_s``."""
    _kill_group(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(server)
        if not _kill_group(server.pid, 0):
            return
        time.sleep(0.05)
    _kill_group(server.pid, signal.SIGKILL)
    time.sleep(0.1)
    _reap(server)


def _watch(grace_s: float, log: str, report_fd: int, command: list[str]) -> int:
    """The watchdog's body: start the server, wait for the caller's end (or the server's), stop the group."""
    # Ctrl-C and a closed terminal reach the caller, whose end is what we act on; SIGTERM sent to us directly
    # ends us through the same cleanup.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _become_subreaper()
    output = open(log, "ab") if log else subprocess.DEVNULL
    if log:  # several runs may share the log: say whose lines follow
        output.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        output.flush()
    report = os.fdopen(report_fd, "w")
    try:
        # the server gets SIGTERM if the watchdog itself is killed (kill -9 of it)
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                  start_new_session=True, preexec_fn=ends_with_this_process())
    except OSError as err:
        if log:
            output.write(f"{command[0]}: {err}\n".encode())
        _tell(report, "")
        return 127
    try:
        _tell(report, str(server.pid))
        while server.returncode is None:
            ready, _, _ = select.select([0], [], [], 0.5)
            if ready and not os.read(0, 4096):  # end-of-file: the caller is gone or asked us to stop
                break
            _reap(server)
        else:  # the server stopped by itself: report its status as ours (a signal N as 128 + N, like a shell)
            return server.returncode if server.returncode >= 0 else 128 - server.returncode
    finally:
        if server.returncode is None:
            _stop_group(server, grace_s)
        else:  # the leader is gone; what it left in its group goes too
            _kill_group(server.pid, signal.SIGKILL)
            time.sleep(0.1)
            _reap(server)
    return 0


def _tell(report, line: str) -> None:
    """Send the caller the server's pid (or an empty line); a caller killed meanwhile is no error here."""
    try:
        with report:
            report.write(line + "\n")
    except OSError:  # the read end is closed: the caller is gone, which the loop on stdin sees next
        pass


if __name__ == "__main__":
    grace, log_path, fd, separator, *server_command = sys.argv[1:]
    sys.exit(_watch(float(grace), log_path, int(fd), server_command))
