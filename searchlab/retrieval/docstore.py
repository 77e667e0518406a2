"""The document store: row number → (id, contents), shared by the BM25 and dense indexes.

Lucene keeps only each document's id (a stored ``contents`` field would have to
be decompressed per hit and copied through JNI, which made search 2-3× slower);
FAISS keeps only vectors. Both map their hits to a *row* here instead.

Layout of ``docstore/``:

* ``docs.jsonl``  one ``{"id", "contents"}`` object per line, in corpus order
  (readable with any JSONL tool);
* ``offsets.npy`` int64 byte offsets, ``n + 1`` entries: row ``i`` is
  ``docs.jsonl[offsets[i]:offsets[i + 1]]``.

The file is memory-mapped, so opening is instant and only the pages of passages
actually returned are read.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import orjson

from searchlab.retrieval.base import Hit, RetrieverError, check_request
from searchlab.retrieval.coalesce import MAX_HITS, Coalescer

DOCS_FILE = "docs.jsonl"
OFFSETS_FILE = "offsets.npy"


class DocStoreWriter:
    """Append documents in row order; :meth:`close` writes the offsets. Use as a context manager."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._file = open(folder / DOCS_FILE, "wb")
        self._offsets: list[int] = [0]

    def add(self, doc_id: str, contents: str) -> int:
        """Store one document; return its row number."""
        line = orjson.dumps({"id": doc_id, "contents": contents}) + b"\n"
        self._file.write(line)
        self._offsets.append(self._offsets[-1] + len(line))
        return len(self._offsets) - 2

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
            np.save(self.folder / OFFSETS_FILE, np.asarray(self._offsets, dtype=np.int64))

    def __enter__(self) -> "DocStoreWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DocStore:
    """Read-only access to a ``docstore/`` folder by row number (thread-safe)."""

    def __init__(self, folder: Path):
        docs, offsets = folder / DOCS_FILE, folder / OFFSETS_FILE
        if not docs.is_file() or not offsets.is_file():
            raise FileNotFoundError(f"{folder} is not a document store (needs {DOCS_FILE} and {OFFSETS_FILE})")
        # a plain ndarray view of the memmap: indexing a np.memmap subclass costs ~3 µs a call
        self.offsets = np.asarray(np.load(offsets, mmap_mode="r"))
        self._file = open(docs, "rb")
        size = docs.stat().st_size
        if size != int(self.offsets[-1]):
            raise ValueError(f"{folder}: {DOCS_FILE} has {size} bytes but {OFFSETS_FILE} expects {int(self.offsets[-1])}")
        # mmap of an empty file is an error; an empty store simply has no rows
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, row: int) -> tuple[str, str]:
        """``(id, contents)`` of one row."""
        doc = orjson.loads(self._map[int(self.offsets[row]) : int(self.offsets[row + 1])])
        return doc["id"], doc["contents"]

    def get_many(self, rows) -> list[tuple[str, str]]:
        """``(id, contents)`` for each row in ``rows`` (any int sequence or array), in order."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = self.offsets[rows].tolist()
        ends = self.offsets[rows + 1].tolist()
        out = []
        for start, end in zip(starts, ends):
            doc = orjson.loads(self._map[start:end])
            out.append((doc["id"], doc["contents"]))
        return out

    def ids(self, chunk: int = 65536) -> set[str]:
        """Every document id in the store (read a chunk of rows at a time)."""
        found: set[str] = set()
        for start in range(0, len(self), chunk):
            found.update(doc_id for doc_id, _ in self.get_many(range(start, min(start + chunk, len(self)))))
        return found

    def raw_many(self, rows) -> list[bytes]:
        """Each row's stored JSON object ``{"id": ..., "contents": ...}`` as UTF-8 bytes, undecoded.

        Exactly the ``document`` object of Search-R1's ``/retrieve`` answer, so the
        server can copy it into a response without decoding and re-encoding it.
        """
        rows = np.asarray(rows, dtype=np.int64)
        # the stored line ends with "\n": drop it
        return [self._map[start : end - 1] for start, end in zip(self.offsets[rows].tolist(), self.offsets[rows + 1].tolist())]

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        self._file.close()


class DocStoreRetriever:
    """Shared search path of the retrievers whose hits are docstore rows (BM25 and dense).

    A subclass sets ``self.docstore`` and implements ``_search_batch(queries, k)``
    returning ``(rows, scores)`` per query; concurrent callers are merged into one
    such batch of at most ``max_batch_hits`` hits by a
    :class:`~searchlab.retrieval.coalesce.Coalescer`.
    """

    docstore: DocStore

    def __init__(self, max_batch_hits: int = MAX_HITS) -> None:
        self._batches = Coalescer(self._search_batch, max_batch_hits)
        self._closed = False

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Up to ``k`` hits per query, best first (see :class:`~searchlab.retrieval.base.Retriever`)."""
        results = []
        for rows, scores in self._ranked(queries, k):
            docs = self.docstore.get_many(rows) if scores else []
            results.append([Hit(doc_id, contents, score) for (doc_id, contents), score in zip(docs, scores)])
        return results

    def search_documents(self, queries: list[str], k: int) -> list[list[tuple[bytes, float]]]:
        """Hits as ``(document JSON bytes, score)`` (see :class:`~searchlab.retrieval.base.DocumentSearch`)."""
        return [list(zip(self.docstore.raw_many(rows), scores)) if scores else [] for rows, scores in self._ranked(queries, k)]

    def _ranked(self, queries: list[str], k: int) -> list[tuple[np.ndarray, list[float]]]:
        check_request(queries, k)
        if self._closed:
            raise RetrieverError(f"{type(self).__name__} is closed")
        if not queries:
            return []
        return self._batches.search(list(queries), k)

    def _search_batch(self, queries: list[str], k: int) -> list[tuple[np.ndarray, list[float]]]:
        raise NotImplementedError
