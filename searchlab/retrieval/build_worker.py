"""The index build itself, run in a child process by :func:`searchlab.retrieval.indexing.build_index`.

Usage (internal): ``python -m searchlab.retrieval.build_worker '<json spec>'`` with
spec ``{"params": <IndexParams as JSON>, "corpus": path, "out_dir": path}``.
Progress bars and Java's logs go to stderr; the last line on stdout is one JSON
object: the build summary, or ``{"error": message}`` with exit status 1.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from searchlab.params import IndexParams

FORMAT_VERSION = 1
INFO_FILE = "index_info.json"


def run_build(params: IndexParams, corpus: Path, out_dir: Path) -> dict:
    """Build ``docstore/``, ``bm25/`` and (if enabled) ``dense/`` under ``out_dir``; return the summary."""
    from searchlab.retrieval.docstore import DocStore
    from searchlab.retrieval.ingest import ingest_corpus
    from searchlab.retrieval.lucene_index import build_lucene_index

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    shards_dir = out_dir / "_shards"
    ingested = ingest_corpus(corpus, out_dir / "docstore", shards_dir, n_shards=params.threads)
    timings["ingest_s"] = time.perf_counter() - t0
    if ingested.documents == 0:
        raise ValueError(f"{corpus}: no documents with non-empty contents to index")

    t0 = time.perf_counter()
    bm25 = build_lucene_index(shards_dir, out_dir / "bm25", params.threads, ingested.rows)
    shutil.rmtree(shards_dir)
    timings["bm25_s"] = time.perf_counter() - t0
    documents, skipped_empty = ingested.documents, ingested.skipped_empty
    del ingested  # the id→row map can be large; the dense step does not need it

    dense = None
    if params.dense.enabled:
        from searchlab.retrieval.dense_index import build_dense_index

        t0 = time.perf_counter()
        store = DocStore(out_dir / "docstore")
        try:
            dense = build_dense_index(store, out_dir / "dense", params.dense)
        finally:
            store.close()
        timings["dense_s"] = time.perf_counter() - t0

    info = {
        "format": FORMAT_VERSION,
        "documents": documents,
        "skipped_empty": skipped_empty,
        "bm25": bm25,
        "dense": dense,
        "dense_documents": dense["documents"] if dense else 0,
    }
    # the file holds what was built, the same for every build of one corpus; sizes (Lucene's depend on how its
    # threads interleaved) and durations are measurements, returned alone
    (out_dir / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return {**info, "bytes": _folder_bytes(out_dir), "timings": {k: round(v, 3) for k, v in timings.items()}}


def _folder_bytes(folder: Path) -> dict[str, int]:
    return {
        part.name: sum(f.stat().st_size for f in part.rglob("*") if f.is_file())
        for part in sorted(folder.iterdir())
        if part.is_dir()
    }


def _die_with_parent() -> None:
    # If the parent is SIGKILLed it cannot kill us; ask Linux to send SIGTERM then,
    # so no orphaned JVM keeps writing into a folder nobody will rename.
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        except OSError:
            pass


def main(argv: list[str]) -> int:
    _die_with_parent()
    # Everything printed by Python or Java goes to stderr; stdout carries only the result line.
    result_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        spec = json.loads(argv[0])
        params = IndexParams.model_validate(spec["params"])
        summary = run_build(params, Path(spec["corpus"]), Path(spec["out_dir"]))
    except Exception as err:  # the parent turns this into an IndexBuildError with the message
        import traceback

        traceback.print_exc()
        result_out.write(json.dumps({"error": f"{type(err).__name__}: {err}"}) + "\n")
        result_out.flush()
        return 1
    result_out.write(json.dumps(summary) + "\n")
    result_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
