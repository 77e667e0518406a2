"""BM25 search over the Lucene index with Anserini's analyzer and query builder.

Why not pyserini's ``LuceneSearcher``/``SimpleSearcher``: per query they sort
ties through a doc-values field, run a reranker cascade, load each hit's stored
document and hand every hit to Python as its own Java object. Measured here,
that is ~200 µs of Java per query plus JNI per hit, and a ~0.5 ms thread pool
per batch call. This module asks Lucene directly: one
``IndexSearcher.search`` per query (Lucene's top-k pruning, ~30 µs on 50k
passages), and its hits cross JNI as one JSON string written by Jackson
(shipped in Anserini's jar) and read by orjson: ~10 µs for 10 hits, ~0.3 ms for
1,000, where wrapping each hit as a Java object costs ~5 µs a hit. Contents
come from the memory-mapped document store through ``rows.npy``.

Scores equal Anserini's BM25 (same analyzer, same ``BM25Similarity``) before
its 4-decimal rounding; equal scores are ordered by Lucene docid.

Threads: a batch is cut into ``threads`` slices searched by Python threads;
pyjnius releases the GIL while Java runs, so the slices' Java work runs in
parallel. Concurrent callers (server requests, parallel rollouts) are merged
into one batch by :class:`~searchlab.retrieval.coalesce.Coalescer`, so they do
not fight over the CPUs and each batch is large enough to split well.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import orjson

from searchlab.retrieval.base import IndexNotFoundError, RetrieverBase, RetrieverError
from searchlab.retrieval.coalesce import MAX_HITS
from searchlab.retrieval.docstore import DocStore, DocStoreRetriever
from searchlab.retrieval.jvm import autoclass
from searchlab.retrieval.lucene_index import CONTENTS_FIELD, ROWS_FILE

MAX_QUERY_TERMS = 1 << 16  # Lucene's default (1024 clauses) would turn a long pasted query into an error
MIN_SLICE = 8  # below this many queries per thread, handing work to threads costs more than it saves


def _json_writer():
    """Jackson's ``writeValueAsString`` for Lucene's ``TopDocs``: public fields only.

    Gives ``{"totalHits": {...}, "scoreDocs": [{"score": 6.33, "doc": 1591, "shardIndex": -1}, ...]}``;
    Java's shortest float text round-trips to the same float32 score.
    """
    mapper = autoclass("com.fasterxml.jackson.databind.ObjectMapper")()
    accessor = autoclass("com.fasterxml.jackson.annotation.PropertyAccessor")
    visibility = autoclass("com.fasterxml.jackson.annotation.JsonAutoDetect$Visibility")
    mapper.setVisibility(accessor.ALL, visibility.NONE)
    mapper.setVisibility(accessor.FIELD, visibility.PUBLIC_ONLY)
    return mapper.writeValueAsString


class BM25Retriever(DocStoreRetriever, RetrieverBase):
    """BM25 over ``index_dir/bm25`` (built by :func:`~searchlab.retrieval.indexing.build_index`).

    >>> with BM25Retriever(Path("data/index")) as r:  # doctest: +SKIP
    ...     r.search(["capital of France"], k=3)[0][0].contents
    '"Paris"\\nParis is the capital ...'
    """

    def __init__(self, index_dir: Path, k1: float = 0.9, b: float = 0.4, threads: int = 2,
                 max_batch_hits: int = MAX_HITS):
        index_dir = Path(index_dir)
        lucene_dir = index_dir / "bm25"
        if not (lucene_dir / ROWS_FILE).is_file() or not any(lucene_dir.glob("segments_*")):
            raise IndexNotFoundError(f"no BM25 index in {lucene_dir}: run `searchlab run index` first")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.docstore = DocStore(index_dir / "docstore")
        self._rows = np.asarray(np.load(lucene_dir / ROWS_FILE, mmap_mode="r"))  # ndarray view: memmap indexing is slow

        paths = autoclass("java.nio.file.Paths")
        directory = autoclass("org.apache.lucene.store.FSDirectory").open(paths.get(str(lucene_dir.resolve())))
        self._reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
        searcher_class = autoclass("org.apache.lucene.search.IndexSearcher")
        searcher_class.setMaxClauseCount(MAX_QUERY_TERMS)
        # pyjnius would pick the IndexReaderContext constructor for a DirectoryReader: name the signature
        self._searcher = searcher_class(self._reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
        self._searcher.setSimilarity(autoclass("org.apache.lucene.search.similarities.BM25Similarity")(float(k1), float(b)))
        self._analyzer = autoclass("io.anserini.index.IndexCollection").DEFAULT_ANALYZER  # what IndexCollection indexed with
        self._query_builder = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self._to_json = _json_writer()
        self.threads = threads
        # threads - 1 helpers: the thread that runs a batch searches its first slice itself
        self._pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="bm25") if threads > 1 else None
        super().__init__(max_batch_hits)  # concurrent callers share one batch of at most this many hits

    @property
    def num_documents(self) -> int:
        """Documents in the index."""
        return int(self._reader.numDocs())

    def _search_batch(self, queries: list[str], k: int) -> list[tuple[np.ndarray, list[float]]]:
        """Docstore rows and scores of each query's top ``k``; what concurrent callers share."""
        if self._pool is None or len(queries) < 2 * MIN_SLICE:
            return self._search_slice(queries, k)
        size = max(MIN_SLICE, math.ceil(len(queries) / self.threads))
        futures = [self._pool.submit(self._search_slice, queries[i : i + size], k) for i in range(size, len(queries), size)]
        results = self._search_slice(queries[:size], k)  # the calling thread takes the first slice itself
        for future in futures:
            results.extend(future.result())
        return results

    def _search_slice(self, queries: list[str], k: int) -> list[tuple[np.ndarray, list[float]]]:
        searcher, analyzer, build, to_json = self._searcher, self._analyzer, self._query_builder.buildQuery, self._to_json
        results = []
        # Lucene breaks score ties by its internal doc id, which a multi-threaded index build assigns in no fixed
        # order. Fetch until the tie group at rank k is complete, then order ties by docstore row (corpus order),
        # so every build of one corpus ranks alike.
        for query in queries:
            lucene_query, fetch = build(CONTENTS_FIELD, analyzer, query), k + 8
            while True:
                try:
                    top = orjson.loads(to_json(searcher.search(lucene_query, fetch)))["scoreDocs"]
                except Exception as err:  # a JavaException; say which query
                    raise RetrieverError(f"BM25 search failed for query {query[:80]!r}: {err}") from err
                if len(top) < fetch or len(top) <= k or top[-1]["score"] != top[k - 1]["score"]:
                    break
                fetch *= 4
            results.append(break_ties(self._rows[[hit["doc"] for hit in top]], [hit["score"] for hit in top], k))
        return results

    def close(self) -> None:
        """Stop the search threads and close the index (the JVM stays up for the rest of the process)."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._reader.close()
        self.docstore.close()


def break_ties(rows: np.ndarray, scores: list[float], k: int) -> tuple[np.ndarray, list[float]]:
    """The best ``k`` of ``(rows, scores)``: by score, equal scores in docstore row (corpus) order.

    >>> break_ties(np.array([7, 2, 9, 1]), [3.0, 3.0, 2.0, 3.0], 3)
    (array([1, 2, 7]), [3.0, 3.0, 3.0])
    """
    order = np.lexsort((rows, -np.asarray(scores, dtype=np.float64)))[:k]
    return rows[order], [scores[i] for i in order]
