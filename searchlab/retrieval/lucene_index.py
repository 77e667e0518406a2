"""Build the BM25 index with Anserini's ``IndexCollection`` (runs inside the build subprocess).

The Lucene index stores only each document's id; ``rows.npy`` beside it maps
every Lucene docid to its row in the document store (Lucene numbers documents in
the order its indexing threads and merges happened to produce, not corpus order).
The folder stays a plain Anserini index that pyserini can open for ids and scores.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from searchlab.progress import counter, track
from searchlab.retrieval.jvm import INDEXING_OPTIONS, autoclass, start_jvm

ROWS_FILE = "rows.npy"
ID_FIELD = "id"  # Anserini's Constants.ID
CONTENTS_FIELD = "contents"  # Anserini's Constants.CONTENTS: the analysed text field BM25 searches


class LuceneBuildError(RuntimeError):
    """Anserini reported errors, or its index does not match the document store."""


def build_lucene_index(shards_dir: Path, index_dir: Path, threads: int, rows: dict[str, int]) -> dict:
    """Index every JSONL shard in ``shards_dir`` into ``index_dir`` and write ``rows.npy``.

    ``threads`` is Anserini's indexing thread count (one thread works on one
    shard at a time); ``rows`` maps each document id to its docstore row.
    Returns ``{"indexed", "empty", "skipped", "errors", "segments", "statistics"}``: the statistics are the
    index's term statistics (:func:`_statistics`), which with the document store identify its content.
    """
    start_jvm(INDEXING_OPTIONS)
    args = autoclass("io.anserini.index.IndexCollection$Args")()
    args.collectionClass = "JsonCollection"
    args.generatorClass = "DefaultLuceneDocumentGenerator"
    args.input = str(shards_dir)
    args.index = str(index_dir)
    args.threads = threads
    args.optimize = True  # one segment: fastest search, and a layout that does not depend on thread timing
    args.quiet = True  # our progress bar replaces Anserini's per-file log lines
    args.storeContents = False  # contents come from the document store (see docstore.py)
    args.storeRaw = False
    # Anserini's default 4 GB RAM buffer exceeds the default heap (1/4 of RAM) of a small machine
    heap_mb = int(autoclass("java.lang.Runtime").getRuntime().maxMemory()) // (1 << 20)
    args.memoryBuffer = max(64, min(4096, heap_mb // 3))
    indexer = autoclass("io.anserini.index.IndexCollection")(args)
    counters = indexer.getCounters()
    _run_with_progress(indexer, counters, total=len(rows))
    stats = {
        "indexed": int(counters.indexed.get()),
        "empty": int(counters.empty.get()),
        "skipped": int(counters.skipped.get()),
        "errors": int(counters.errors.get()) + int(counters.unindexable.get()),
    }
    if stats["errors"]:
        raise LuceneBuildError(f"Anserini failed to index {stats['errors']} documents (see its log above)")
    stats["segments"], stats["statistics"] = _write_rows(index_dir, rows)
    return stats


def _run_with_progress(indexer, counters, total: int) -> None:
    # IndexCollection.run() blocks in Java (pyjnius releases the GIL there), so a
    # Python thread can poll its counter to drive the progress bar meanwhile.
    done = threading.Event()

    def poll() -> None:
        with counter(total=total, desc="bm25 index", unit="doc") as bar:
            while not done.wait(0.5):
                bar.update(int(counters.indexed.get()) - bar.n)
            bar.update(int(counters.indexed.get()) - bar.n)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        indexer.run()
    finally:
        done.set()
        poller.join()


def _write_rows(index_dir: Path, rows: dict[str, int]) -> tuple[int, dict[str, int]]:
    """Write ``rows.npy``; return the index's segment count and :func:`_statistics`."""
    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
        autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(str(index_dir)))
    )
    try:
        n = reader.maxDoc()
        if n != reader.numDocs():
            raise LuceneBuildError(f"{index_dir}: the new index has deleted documents; rebuild it from scratch")
        stored = reader.storedFields()
        mapping = np.empty(n, dtype=np.int64)
        for docid in track(range(n), total=n, desc="bm25 rows", unit="doc"):
            doc_id = stored.document(docid).get(ID_FIELD)
            row = rows.get(doc_id)
            if row is None:
                raise LuceneBuildError(f"{index_dir}: Lucene document {doc_id!r} is not in the document store")
            mapping[docid] = row
        np.save(index_dir / ROWS_FILE, mapping)
        return int(reader.leaves().size()), _statistics(reader)
    finally:
        reader.close()


def _statistics(reader) -> dict[str, int]:
    """The searched field's statistics: documents, non-empty documents, distinct terms and term occurrences.

    Lucene writes a random id and a timestamp into every segment, so two builds of one corpus never have the same
    bytes; these numbers (a function of the analysed text alone) and the document store's bytes are what the
    stage's content hash covers instead (see the README).
    """
    stats = autoclass("io.anserini.index.IndexReaderUtils").getIndexStats(reader)  # of Anserini's contents field
    return {name: int(stats.get(name)) for name in ("documents", "non_empty_documents", "unique_terms", "total_terms")}
