"""What every retriever shares: the :class:`Hit` it returns and the :class:`Retriever` protocol.

A retriever answers a *batch* of queries at once (batches are how the trainer,
the synthesiser and the HTTP server all call it) and returns, per query, its
hits best first.

>>> from searchlab.retrieval import open_retriever  # doctest: +SKIP
>>> with open_retriever(params.retriever, Path("data/index")) as r:  # doctest: +SKIP
...     [[hit.id for hit in hits] for hits in r.search(["who founded Rome"], k=3)]
[['doc17', 'doc3', 'doc99']]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved passage: its corpus id, its full ``"Title"\\ntext`` contents and the retriever's score."""

    id: str
    contents: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Batch search over a corpus; implementations are BM25, dense, hybrid and HTTP."""

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Return, for each query in order, up to ``k`` hits sorted best first."""
        ...

    def close(self) -> None:
        """Release what the retriever holds (threads, files, connections); searching afterwards is an error."""
        ...


@runtime_checkable
class DocumentSearch(Protocol):
    """Optional fast path a retriever may offer: hits as ready-made JSON, for the HTTP server."""

    def search_documents(self, queries: list[str], k: int) -> list[list[tuple[bytes, float]]]:
        """Like :meth:`Retriever.search`, but each hit is ``(document, score)`` where ``document`` is
        the UTF-8 JSON object ``{"id": ..., "contents": ...}`` (Search-R1's ``document``)."""
        ...


class TimedRetriever:
    """Wraps a retriever, counting ``calls``, ``queries`` and the ``seconds`` spent searching (results unchanged)."""

    def __init__(self, inner: Retriever):
        self.inner = inner
        self.reset()

    def reset(self) -> None:
        self.calls, self.queries, self.seconds = 0, 0, 0.0

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        started = time.perf_counter()
        try:
            return self.inner.search(queries, k)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1
            self.queries += len(queries)

    def close(self) -> None:
        self.inner.close()


class RecordingRetriever:
    """Wraps a retriever, remembering which passage ids each query returned (``ids``; a query always returns the
    same): how a rollout lists the passages each of its episodes retrieved, whichever episode's search ran them."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever, self.ids = retriever, {}

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        results = self.retriever.search(queries, k)
        for query, hits in zip(queries, results):
            self.ids[query] = [hit.id for hit in hits]
        return results


class RetrieverBase:
    """Context-manager support shared by the concrete retrievers (``with BM25Retriever(...) as r:``)."""

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RetrieverError(RuntimeError):
    """Retrieval failed for a reason the caller should read (bad index, unreachable server, bad request)."""


class IndexNotFoundError(RetrieverError, FileNotFoundError):
    """The index folder (or the part a method needs) does not exist or is incomplete."""


def check_request(queries: list[str], k: int) -> None:
    """Raise ``ValueError`` unless ``queries`` is a list of strings and ``k`` a positive int.

    Retrievers call this first so a bad call fails the same clear way everywhere
    instead of deep inside Java or FAISS.
    """
    if isinstance(queries, str) or not isinstance(queries, (list, tuple)):
        raise ValueError(f"queries must be a list of strings, got {type(queries).__name__}")
    for i, q in enumerate(queries):
        if not isinstance(q, str):
            raise ValueError(f"queries[{i}] must be a string, got {type(q).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
