"""SIGTERM and SIGHUP end a command as Ctrl-C does.

``timeout``, ``docker stop``, CI cancellation, Slurm and a closed terminal stop
a process with SIGTERM or SIGHUP, whose default action kills Python without
running any cleanup: no MLflow run closed, no message. Inside
:func:`ending_on_signals` either signal raises :class:`Terminated`, a
``KeyboardInterrupt``, so the same path as Ctrl-C runs: the stage in progress
stops, its MLflow runs are marked KILLED, the servers and workers bound to the
process end with it. The command then exits ``128 + signal`` (143, 129), as a
shell reports a process the signal killed.

The Java VM behind pyserini would otherwise take SIGTERM for itself (its handler
starts shutting the VM down, and a Python thread then blocks for good in its
next JNI call): :mod:`searchlab.retrieval.jvm` starts it with ``-Xrs``, which
leaves these signals to Python.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The command was stopped by ``signum`` (SIGTERM, SIGHUP); its exit status is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _raise(signum: int, frame) -> None:
    raise Terminated(signum)


@contextmanager
def ending_on_signals() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread; the handlers before it
    are back after it."""
    before = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
