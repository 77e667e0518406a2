"""Time the synthetic-world generator at two or more sizes (run by hand, not a test).

    python bench/corpus_scale.py                      # 10k and 310k entities (~1M passages)
    python bench/corpus_scale.py --entities 1000 50000

Each size runs in a fresh process, so the peak RSS printed is that size's own.
Output goes to a temporary folder that is deleted afterwards. Generation should
grow linearly: seconds per 1k entities stays about flat across sizes.

Output: stdout only: a table, one row per size (entities, passages, facts, seconds, passages/s, seconds
per 1k entities, peak RSS, MiB of corpus.jsonl and kb.jsonl).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _worker(entities: int, out_dir: Path) -> None:
    """Generate one world into ``out_dir`` and print one JSON line of measurements."""
    from searchlab.corpus.world import generate_world
    from searchlab.params import WorldParams

    start = time.perf_counter()
    counts = generate_world(WorldParams(seed=0, entities=entities), out_dir)
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    sizes = {p.name: p.stat().st_size for p in out_dir.iterdir()}
    print(json.dumps({**counts, "seconds": seconds, "peak_rss_mib": peak_kib / 1024, "bytes": sizes}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, nargs="+", default=[10_000, 310_000])
    parser.add_argument("--worker", nargs=2, metavar=("ENTITIES", "OUT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(int(args.worker[0]), Path(args.worker[1]))
        return

    print(f"{'entities':>9} {'passages':>9} {'facts':>9} {'seconds':>8} {'passages/s':>11} "
          f"{'s/1k ent':>8} {'peak RSS':>9} {'corpus':>8} {'kb':>8}")
    for n in args.entities:
        with tempfile.TemporaryDirectory(prefix="corpus-bench-") as tmp:
            run = subprocess.run([sys.executable, __file__, "--worker", str(n), tmp],
                                 capture_output=True, text=True, check=True)
            r = json.loads(run.stdout.strip().splitlines()[-1])
        mib = {k: v / 2**20 for k, v in r["bytes"].items()}
        print(f"{r['entities']:>9,} {r['passages']:>9,} {r['facts']:>9,} {r['seconds']:>8.1f} "
              f"{r['passages'] / r['seconds']:>11,.0f} {1000 * r['seconds'] / r['entities']:>8.3f} "
              f"{r['peak_rss_mib']:>6.0f} MiB {mib['corpus.jsonl']:>4.0f} MiB {mib['kb.jsonl']:>4.0f} MiB")


if __name__ == "__main__":
    main()
