"""What a stage's build costs: CPU time and peak memory of the run's process and of the workers the build launched.

Sampled every ``interval`` seconds by a daemon thread while the build runs:
the resident memory of this process plus that of every process that descends
from it and did not exist when the build started (the training workers
``accelerate launch`` starts, a dvc child), so servers the run started earlier
(Prefect, MLflow) are not counted. CPU time is this process's user and system
time over the build plus that of the children it waited for (the workers, once
they exit). Stages that run at the same time in one process share its figures.
"""

from __future__ import annotations

import os
import threading

import psutil

MB = 1024 * 1024


class ResourceMeter:
    """``with ResourceMeter() as meter: build()``, then :meth:`figures`."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.process = psutil.Process()
        self.peak_rss = self.peak_workers_rss = 0
        self._stop = threading.Event()

    def __enter__(self) -> "ResourceMeter":
        self._before = set(self._descendants())
        self._times = os.times()
        self._thread = threading.Thread(target=self._watch, name="resource-meter", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        after = os.times()
        self.cpu_seconds = sum(getattr(after, f) - getattr(self._times, f)
                               for f in ("user", "system", "children_user", "children_system"))

    def figures(self) -> dict[str, float]:
        """``cpu_seconds``, ``peak_rss_mb`` (the process and its new workers together) and ``workers_peak_rss_mb``."""
        return {"cpu_seconds": round(self.cpu_seconds, 1), "peak_rss_mb": round(self.peak_rss / MB, 1),
                "workers_peak_rss_mb": round(self.peak_workers_rss / MB, 1)}

    def _descendants(self) -> list[int]:
        try:
            return [child.pid for child in self.process.children(recursive=True)]
        except psutil.Error:
            return []

    def _rss(self, pid: int) -> int:
        try:
            return psutil.Process(pid).memory_info().rss
        except psutil.Error:  # ended between the listing and the read
            return 0

    def _sample(self) -> None:
        workers = sum(self._rss(pid) for pid in self._descendants() if pid not in self._before)
        own = self._rss(self.process.pid)
        self.peak_workers_rss = max(self.peak_workers_rss, workers)
        self.peak_rss = max(self.peak_rss, own + workers)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
