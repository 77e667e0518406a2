"""A stage build's CPU time and peak memory: a real worker process that allocates and spins, measured."""

from __future__ import annotations

import subprocess
import sys

from tasks.resources import ResourceMeter

WORKER = "import time; block = bytearray(300 * 1024 * 1024); end = time.time() + 1.0\nwhile time.time() < end: pass"


def test_a_worker_s_memory_and_cpu_time_count_and_a_process_started_before_does_not():
    earlier = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(200 * 1024 * 1024); time.sleep(30)"])
    try:
        with ResourceMeter(interval=0.05) as meter:
            subprocess.run([sys.executable, "-c", WORKER], check=True)
        figures = meter.figures()
    finally:
        earlier.kill()
        earlier.wait()
    assert 300 <= figures["workers_peak_rss_mb"] < 450  # the worker's 300 MB, not the earlier process's 200 MB too
    assert figures["peak_rss_mb"] > figures["workers_peak_rss_mb"]  # plus this process
    assert figures["cpu_seconds"] >= 0.8  # the worker spun for a second, counted once it was waited for
