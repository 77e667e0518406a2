"""Locks shared by every run on one repo, recovered automatically when their holder dies.

A lock is an ``flock`` on a file under ``data/.work/locks/``. The kernel drops
an ``flock`` when the process holding it exits for any reason, SIGKILL
included, so a killed run never leaves a lock that blocks the next one.

Two kinds are used by the stage contract (:mod:`tasks.stage`):

- a *build lock* per stage and fingerprint (exclusive): two runs never build the
  same output at once, and the one that waited finds it built;
- an *output lock* per stage folder: a run holds it shared from the moment it
  has checked ``data/<stage>/`` until the run ends, and publishing a new
  ``data/<stage>/`` needs it exclusively. So no run replaces a folder that
  another run is still reading (or will still read) under the fingerprint it
  checked.

An exclusive holder records who it is in the file, so a waiting run can say
what it waits for.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path


class LockTimeout(TimeoutError):
    """Another run held the lock longer than the caller was willing to wait."""


class StageLock:
    """An exclusive (or, with ``shared=True``, shared) lock on ``path``; use as a context manager.

    >>> with StageLock(Path("/tmp/x.lock"), "demo"):  # doctest: +SKIP
    ...     pass
    """

    def __init__(self, path: Path, holder: str, timeout_s: float = 6 * 3600,
                 on_wait: Callable[[str], None] | None = None, poll_s: float = 0.2, shared: bool = False):
        self.path, self.holder, self.timeout_s, self.on_wait, self.poll_s = path, holder, timeout_s, on_wait, poll_s
        self.shared = shared
        self._fd: int | None = None

    def acquire(self) -> "StageLock":
        fd = self._open()
        deadline = time.monotonic() + self.timeout_s
        told = False
        while not self._take(fd):
            if not told and self.on_wait:
                self.on_wait(self.describe_holder())
                told = True
            if time.monotonic() > deadline:
                os.close(fd)
                raise LockTimeout(f"{self.path}: still held after {self.timeout_s:.0f} s by {self.describe_holder()}")
            time.sleep(self.poll_s)
        self._hold(fd)
        return self

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it, without waiting; whether it was taken."""
        fd = self._open()
        if not self._take(fd):
            os.close(fd)
            return False
        self._hold(fd)
        return True

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _take(self, fd: int) -> bool:
        """One attempt at the lock on ``fd``, without waiting."""
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _hold(self, fd: int) -> None:
        """Keep the lock taken on ``fd``; an exclusive holder records who it is for :meth:`describe_holder`."""
        if not self.shared:
            info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "holder": self.holder}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def downgrade(self) -> None:
        """Turn a held exclusive lock into a shared one.

        The kernel does this in two steps (unlock, then lock shared), so another
        process may take the exclusive lock in between: callers check afterwards
        that what they locked is still what they expect.
        """
        assert self._fd is not None and not self.shared
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        self.shared = True

    def release(self) -> None:
        if self._fd is not None:
            if not self.shared:
                os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def describe_holder(self) -> str:
        """Who holds the lock, as recorded in the lock file (best effort; shared holders are not recorded)."""
        try:
            info = json.loads(self.path.read_text() or "{}")
            since = time.strftime("%H:%M:%S", time.localtime(info["since"]))
            return f"pid {info['pid']} on {info['host']} ({info['holder']}) since {since}"
        except (OSError, ValueError, KeyError):
            return "other runs reading it" if not self.shared else "another run"

    def __enter__(self) -> "StageLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
