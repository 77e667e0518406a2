"""Whether the process that recorded itself earlier (in an MLflow run's tags) is still alive.

A pid alone does not say that: once the process dies the kernel may hand its pid to an unrelated process, and a
check of the pid alone would then keep the dead run's record alive for as long as that process runs. So the
record also holds :func:`process_identity`: the machine's boot id and the process's start time (field 22 of
``/proc/<pid>/stat``, clock ticks since boot), which together name one process on one machine for good.
Where ``/proc`` is missing (not Linux) the identity is empty and only the pid is checked.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    """Fields 3 onwards of ``/proc/<pid>/stat`` (state first). The command name (field 2) may hold spaces and
    parentheses, so the split starts after its last ``)``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def process_identity(pid: int | None = None) -> str:
    """``<boot id>:<start time in ticks>`` of process ``pid`` (this process by default); "" without ``/proc``."""
    try:
        started = _stat_fields(pid or os.getpid())[19]  # field 22
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except (OSError, IndexError, ValueError):
        return ""
    return f"{boot}:{started}"


def is_alive(pid: int, identity: str = "") -> bool:
    """Whether process ``pid`` still runs on this machine (a zombie, which only waits to be reaped, does not)
    and, when ``identity`` (its :func:`process_identity` recorded earlier) is given, is that same process
    rather than a later one that got its pid."""
    if pid <= 0:  # 0 and negative pids name process groups to os.kill, not a process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, run by another user
    try:
        state = _stat_fields(pid)[0]
    except FileNotFoundError:
        return False  # it exited just now
    except (OSError, IndexError, ValueError):
        return True  # no /proc: the pid is all there is to go on
    if state in ("Z", "X"):
        return False
    return not identity or process_identity(pid) == identity


def ends_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for a child that must not outlive the process starting it, however that ends (``kill -9``
    too): Linux sends the child SIGTERM when its parent dies (``PR_SET_PDEATHSIG``); elsewhere it does nothing.

    The signal follows the thread that started the child, so start it from a thread that waits for it."""
    parent = os.getpid()

    def arrange() -> None:
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # it died before the request took effect
            os._exit(1)

    return arrange
