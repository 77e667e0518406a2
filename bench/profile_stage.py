"""Where one stage's time and memory go: its top functions (cProfile) and its memory high-water mark.

    python bench/profile_stage.py evaluate                     # the demo's params
    python bench/profile_stage.py sft --params params/smoke.yaml --top 30
    python bench/profile_stage.py rl --set rl.steps=5          # any params override

Run by hand after the stage's inputs are built (`make demo`, or `searchlab run`
up to the stage before). The stage is built as `searchlab run` builds it
(its build function, its inputs from ``data/``), but into a scratch folder
under ``data/.work/profile/`` that replaces nothing, with cProfile on. A
training stage trains in a worker process (``accelerate launch``): the worker
profiles itself too (``SEARCHLAB_PROFILE``, honoured by
:func:`searchlab.train.launch.run_job`), and its functions are printed as well;
in the stage's own profile that time shows as waiting. Printed: wall and CPU
time, the peak RSS of the process with its workers (:mod:`tasks.resources`),
and the top functions by their own time and by cumulative time, per process.
The ``.prof`` files stay in the scratch folder for snakeviz or ``pstats``.

Output: stdout: one line of wall time, CPU time and peak RSS, then ``pstats`` tables per process;
files: ``<data_dir>/.work/profile/<stage>/`` (``stage.prof``, ``worker-rank<N>.prof``, the stage's
output in ``out/``), replaced by the next profile of that stage.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def top(path: Path, title: str, n: int) -> None:
    """Print the ``n`` functions of the profile at ``path`` with the most own time, then cumulative time."""
    stats = pstats.Stats(str(path))
    stats.strip_dirs()
    for order in ("tottime", "cumulative"):
        print(f"\n== {title}: top {n} by {order} ==")
        stats.sort_stats(order).print_stats(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", help="a stage name: corpus, index, qa, benchmarks, base, sft, selfplay, rl, evaluate")
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--top", type=int, default=25, help="functions listed per table")
    args = parser.parse_args()

    from searchlab.params import load_params
    from tasks.registry import BY_NAME
    from tasks.resources import ResourceMeter
    from tasks.stage import StageContext

    if args.stage not in BY_NAME:
        parser.error(f"no stage {args.stage!r}; one of {', '.join(BY_NAME)}")
    stage = BY_NAME[args.stage]
    p = load_params(ROOT / args.params, args.overrides)
    data = ROOT / p.runtime.data_dir
    inputs = {name: data / name for name in stage.needs(p)}
    missing = [name for name, folder in inputs.items() if not (folder / "manifest.json").is_file()]
    if missing:
        sys.exit(f"build {', '.join(missing)} first (searchlab run {missing[-1]} --params {args.params})")
    scratch = data / ".work" / "profile" / stage.name
    shutil.rmtree(scratch, ignore_errors=True)
    out, work = scratch / "out", scratch / "work"
    out.mkdir(parents=True)
    work.mkdir()
    os.environ["SEARCHLAB_PROFILE"] = str(scratch / "worker")  # a training worker writes worker-rank<N>.prof
    profiler = cProfile.Profile()
    started, cpu = time.perf_counter(), time.process_time()
    with ResourceMeter() as meter:
        profiler.enable()
        counts = stage.build(StageContext(stage.name, p, ROOT, inputs, out, work))
        profiler.disable()
    seconds = time.perf_counter() - started
    profiler.dump_stats(scratch / "stage.prof")
    used = meter.figures()
    print(f"stage {stage.name}: {seconds:.1f} s wall, {used['cpu_seconds']:.1f} s CPU (this process "
          f"{time.process_time() - cpu:.1f} s), peak RSS {used['peak_rss_mb']:.0f} MB (workers "
          f"{used['workers_peak_rss_mb']:.0f} MB); counts: {counts}")
    top(scratch / "stage.prof", f"{stage.name} (stage process)", args.top)
    for worker in sorted(scratch.glob("worker-rank*.prof")):
        top(worker, f"{stage.name} ({worker.stem})", args.top)
    print(f"\nprofiles: {scratch}/*.prof")


if __name__ == "__main__":
    main()
