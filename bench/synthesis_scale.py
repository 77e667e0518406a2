"""Time QA synthesis on worlds of two or more sizes (run by hand, not a test).

    python bench/synthesis_scale.py                     # 10k and 100k entities, default qa params
    python bench/synthesis_scale.py --entities 2000 20000

For each size, in a fresh process: generate the world and index it (not timed),
then run :func:`searchlab.synth.synthesize` with the default params and report
verified (kept) questions, seconds, questions per second and peak RSS. The last
line gives how time grew against how the world grew: about equal means linear.

Output: stdout only: one line per size, then one line of how time grew against the world; each
size's world, index and questions live in a temporary folder, deleted.
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


def _worker(entities: int, root: Path) -> None:
    from searchlab.corpus.world import generate_world
    from searchlab.params import IndexParams, Params, WorldParams
    from searchlab.retrieval import build_index
    from searchlab.synth.pipeline import synthesize

    corpus, index, out, work = (root / n for n in ("corpus", "index", "qa", "work"))
    for folder in (corpus, index, out):
        folder.mkdir()
    generate_world(WorldParams(seed=0, entities=entities), corpus)
    build_index(IndexParams(threads=2), corpus / "corpus.jsonl", index)
    params = Params()
    start = time.perf_counter()
    counts = synthesize(params.qa, params.retriever, corpus, index, out, work)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"entities": entities, "kept": counts["kept"], "candidates": counts["attempts"],
                      "seconds": round(seconds, 2), "questions_per_s": round(counts["kept"] / seconds, 1),
                      "search_seconds": counts["search_seconds"], "searches": counts["searches"],
                      "peak_rss_mib": round(peak)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--worker", nargs=2, metavar=("ENTITIES", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(int(args.worker[0]), Path(args.worker[1]))
        return
    rows = []
    for n in args.entities:
        with tempfile.TemporaryDirectory(prefix="synth-bench-") as tmp:
            started = time.perf_counter()
            done = subprocess.run([sys.executable, __file__, "--worker", str(n), tmp], check=True,
                                  capture_output=True, text=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{n:>8,} entities: {row['kept']:>8,} questions kept in {row['seconds']:>8.1f} s "
                  f"= {row['questions_per_s']:>6.1f} q/s; {row['search_seconds']:.1f} s of it in "
                  f"{row['searches']:,} BM25 searches; peak RSS {row['peak_rss_mib']:,} MiB "
                  f"(whole process incl. world and index: {time.perf_counter() - started:.0f} s)", flush=True)
    first, last = rows[0], rows[-1]
    rest = [r["seconds"] - r["search_seconds"] for r in (first, last)]
    print(f"entities grew {last['entities'] / first['entities']:.1f}x; kept questions grew "
          f"{last['kept'] / first['kept']:.1f}x; synthesis time grew {last['seconds'] / first['seconds']:.1f}x: "
          f"time outside the retriever {rest[1] / rest[0]:.1f}x, time in the retriever "
          f"{last['search_seconds'] / first['search_seconds']:.1f}x "
          f"(per search {last['search_seconds'] / last['searches'] * 1e3:.2f} ms vs "
          f"{first['search_seconds'] / first['searches'] * 1e3:.2f} ms: BM25 postings grow with the corpus)")


if __name__ == "__main__":
    main()
