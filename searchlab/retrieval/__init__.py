"""Retrieval: build the index of a corpus, search it (BM25, dense, hybrid, or a remote server), serve it, score it.

Layout of an index folder (``data/index/``, written by :func:`build_index`):

* ``docstore/`` every passage by row (``docs.jsonl`` + ``offsets.npy``);
* ``bm25/`` an Anserini/Lucene index (ids only) plus ``rows.npy`` (Lucene docid → row);
* ``dense/`` optional FAISS index of unit sentence embeddings (``index.faiss``, ``meta.json``);
* ``index_info.json`` what was built: counts and the BM25 index's term statistics.

Modules, one job each:

* ``base`` Hit, the Retriever protocol, errors; ``jvm`` the Java VM for Anserini;
* building: ``indexing`` (the API, runs a child process) → ``build_worker`` →
  ``ingest`` (corpus → docstore + shards), ``lucene_index`` (Anserini), ``dense_index``
  (``encoders`` + FAISS); ``docstore`` reads and writes the passages;
* searching: ``lucene`` (BM25), ``dense``, ``hybrid``, ``client`` (HTTP), all batch
  concurrent callers through ``coalesce``;
* serving: ``server`` (FastAPI app, uvicorn), ``searchr1`` (the wire format),
  ``batching`` (one search for all waiting requests);
* evaluation: ``beir`` (BEIR folders, runs) and ``metrics`` (trec_eval semantics).

Importing this package is cheap: the JVM, torch and FastAPI load only when
something needs them.
"""

from __future__ import annotations

from pathlib import Path

from searchlab.params import RetrieverParams
from searchlab.retrieval.base import Hit, IndexNotFoundError, Retriever, RetrieverError

__all__ = ["Hit", "IndexNotFoundError", "Retriever", "RetrieverError", "build_index", "open_retriever"]


def open_retriever(params: RetrieverParams, index_dir: Path) -> Retriever:
    """The retriever ``params`` ask for: the HTTP server at ``params.url`` if set, else ``params.method`` over ``index_dir``.

    ``index_dir`` is the folder :func:`build_index` wrote (``bm25/``, ``docstore/``,
    maybe ``dense/``). A missing index raises :class:`IndexNotFoundError` saying
    to run ``searchlab run index``. Concurrent searches are merged into batches of
    at most one largest request's hits (``max_queries × max_topk``), which bounds
    the memory a burst of callers takes. The result is a context manager; close it when done.
    """
    if params.url:
        from searchlab.retrieval.client import HttpRetriever

        return HttpRetriever(params.url)
    index_dir = Path(index_dir)
    if not (index_dir / "docstore").is_dir() or not (index_dir / "bm25").is_dir():
        raise IndexNotFoundError(
            f"no retrieval index at {index_dir} (expected bm25/ and docstore/ there): run `searchlab run index` first"
        )
    bm25 = dense = None
    max_batch_hits = params.max_queries * params.max_topk
    try:
        if params.method in ("bm25", "hybrid"):
            from searchlab.retrieval.lucene import BM25Retriever

            bm25 = BM25Retriever(index_dir, k1=params.k1, b=params.b, threads=params.threads,
                                 max_batch_hits=max_batch_hits)
        if params.method in ("dense", "hybrid"):
            from searchlab.retrieval.dense import DenseRetriever

            dense = DenseRetriever(index_dir, max_batch_hits=max_batch_hits)
    except BaseException:
        if bm25 is not None:
            bm25.close()
        raise
    if params.method == "hybrid":
        from searchlab.retrieval.hybrid import HybridRetriever

        return HybridRetriever(bm25, dense, params.hybrid_alpha)
    return bm25 if params.method == "bm25" else dense


def build_index(params, corpus_jsonl: Path, out_dir: Path) -> dict:
    """See :func:`searchlab.retrieval.indexing.build_index` (re-exported here for convenience)."""
    from searchlab.retrieval.indexing import build_index as _build

    return _build(params, corpus_jsonl, out_dir)
