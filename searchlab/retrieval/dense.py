"""Dense retrieval: encode queries with the index's sentence encoder, exact inner-product search in FAISS."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from searchlab.retrieval.base import IndexNotFoundError, RetrieverBase, RetrieverError
from searchlab.retrieval.coalesce import MAX_HITS
from searchlab.retrieval.dense_index import INDEX_FILE, META_FILE
from searchlab.retrieval.docstore import DocStore, DocStoreRetriever
from searchlab.retrieval.encoders import encode, load_encoder


class DenseRetriever(DocStoreRetriever, RetrieverBase):
    """Cosine-similarity search over ``index_dir/dense`` (scores in [-1, 1], higher is better).

    ``encoder`` defaults to the one the index was built with (recorded in
    ``dense/meta.json``); pass another name or path only for the same model
    stored elsewhere: a different model's vectors do not match the index.
    Loading takes a few seconds (sentence-transformers and torch import).
    """

    def __init__(self, index_dir: Path, encoder: str | None = None, batch_size: int = 64, device: str | None = None,
                 max_batch_hits: int = MAX_HITS):
        import faiss

        index_dir = Path(index_dir)
        dense_dir = index_dir / "dense"
        if not (dense_dir / INDEX_FILE).is_file() or not (dense_dir / META_FILE).is_file():
            raise IndexNotFoundError(
                f"no dense index in {dense_dir}: set index.dense.enabled=true and run `searchlab run index`"
            )
        self.meta = json.loads((dense_dir / META_FILE).read_text())
        self.docstore = DocStore(index_dir / "docstore")
        self._index = faiss.read_index(str(dense_dir / INDEX_FILE))
        if self._index.ntotal != len(self.docstore):
            raise RetrieverError(
                f"{dense_dir} holds {self._index.ntotal} vectors but the document store {len(self.docstore)} "
                "documents: the index is from another build; run `searchlab run index` again"
            )
        self.encoder_name = encoder or self.meta["encoder"]
        self._model = load_encoder(self.encoder_name, max_length=self.meta["max_length"], device=device)
        if self._model.get_embedding_dimension() != self._index.d:
            raise RetrieverError(
                f"encoder {self.encoder_name!r} makes {self._model.get_embedding_dimension()}-d vectors, "
                f"the index holds {self._index.d}-d ones (built with {self.meta['encoder']!r})"
            )
        self.batch_size = batch_size
        super().__init__(max_batch_hits)  # concurrent callers share one batch of at most this many hits

    def _search_batch(self, queries: list[str], k: int) -> list[tuple[np.ndarray, list[float]]]:
        vectors = encode(self._model, queries, self.batch_size)
        scores, rows = self._index.search(vectors, min(k, self._index.ntotal))
        results = []
        for row_scores, row_ids in zip(scores.tolist(), rows):
            found = row_ids[row_ids >= 0]  # FAISS pads with -1 when it has fewer than k vectors
            results.append((found, row_scores[: len(found)]))
        return results

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """The query vectors this retriever searches with (unit length, float32)."""
        return encode(self._model, list(queries), self.batch_size)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.docstore.close()
