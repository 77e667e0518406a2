"""Benchmark: a no-op rerun of the pipeline against an empty Prefect flow started the same way.

Both are fresh processes in the same project, with the same Prefect setup
(`flows.runtime.configure_prefect`, heartbeat off), measured alternately in one
run. The pipeline is built first (untimed) so every rerun is all-cached.
Target: no-op rerun <= 1.5x the empty flow.

    python bench/noop_rerun.py [--params params/default.yaml] [--repeats 3]

Output: stdout only: one line per repeat, then the two medians and ``ratio: X.XXx (target <= 1.5x)``.
It runs in this checkout: the untimed first run builds the params' ``runtime.data_dir`` (``data/``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHLAB = str(Path(sys.executable).parent / "searchlab")

EMPTY_FLOW = """
from flows.runtime import configure_prefect, find_root
configure_prefect(find_root())
from prefect import flow
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

@flow(name="empty", persist_result=False)
def empty():
    return None

with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
    empty()
"""


def timed(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed, proc.stdout + proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    run = [SEARCHLAB, "run", "--params", args.params]
    print("building the pipeline once (untimed)...", flush=True)
    timed(run)
    empty_times, noop_times = [], []
    for i in range(args.repeats):
        empty_s, _ = timed([sys.executable, "-c", EMPTY_FLOW])
        noop_s, output = timed(run)
        states = [line for line in output.splitlines() if "Finished in state" in line and "Task run" in line]
        if not states or not all("Cached(" in line for line in states):
            sys.exit("the rerun was not all-cached:\n" + "\n".join(states))
        empty_times.append(empty_s)
        noop_times.append(noop_s)
        print(f"repeat {i + 1}: empty flow {empty_s:.2f} s, no-op rerun {noop_s:.2f} s ({len(states)} stages Cached)")
    empty, noop = statistics.median(empty_times), statistics.median(noop_times)
    print(f"\nmedian empty Prefect flow: {empty:.2f} s")
    print(f"median no-op rerun:        {noop:.2f} s")
    print(f"ratio: {noop / empty:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
