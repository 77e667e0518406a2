"""Hybrid retrieval: BM25 and dense results fused by min-max normalised score interpolation.

For each query both retrievers return their top ``depth`` hits (``depth =
max(k, fusion_depth)``). Each list's scores are rescaled to [0, 1] by that
list's own min and max (a list whose scores are all equal maps to 1), a
document missing from one list gets 0 from it, and the fused score over the
union of both lists is ``alpha * bm25 + (1 - alpha) * dense``. Ties go to the
smaller document id, so results are deterministic.

Min-max interpolation keeps the two score scales (BM25: unbounded; cosine: [-1, 1])
comparable per query, and ``alpha`` stays meaningful: 1 is pure BM25, 0 pure dense.
"""

from __future__ import annotations

from searchlab.retrieval.base import Hit, RetrieverBase, check_request


def min_max(hits: list[Hit]) -> dict[str, float]:
    """Each hit's score rescaled to [0, 1] within ``hits`` (all 1.0 when the scores are all equal)."""
    if not hits:
        return {}
    scores = [h.score for h in hits]
    low, high = min(scores), max(scores)
    if high == low:
        return {h.id: 1.0 for h in hits}
    return {h.id: (h.score - low) / (high - low) for h in hits}


def fuse(bm25_hits: list[Hit], dense_hits: list[Hit], alpha: float, k: int) -> list[Hit]:
    """The top ``k`` of the union of two hit lists by ``alpha * bm25_norm + (1 - alpha) * dense_norm``."""
    sparse, dense = min_max(bm25_hits), min_max(dense_hits)
    contents = {h.id: h.contents for h in dense_hits}
    contents.update({h.id: h.contents for h in bm25_hits})
    fused = {doc_id: alpha * sparse.get(doc_id, 0.0) + (1.0 - alpha) * dense.get(doc_id, 0.0) for doc_id in contents}
    ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [Hit(doc_id, contents[doc_id], score) for doc_id, score in ranked]


class HybridRetriever(RetrieverBase):
    """Fuses a BM25 and a dense retriever (see the module docstring for the method); closes both."""

    def __init__(self, bm25, dense, alpha: float = 0.5, fusion_depth: int = 50):
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be within [0, 1], got {alpha}")
        self.bm25, self.dense, self.alpha, self.fusion_depth = bm25, dense, alpha, fusion_depth

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Up to ``k`` fused hits per query, best first; scores are fused scores in [0, 1]."""
        check_request(queries, k)
        depth = max(k, self.fusion_depth)
        sparse_lists = self.bm25.search(queries, depth)
        dense_lists = self.dense.search(queries, depth)
        return [fuse(s, d, self.alpha, k) for s, d in zip(sparse_lists, dense_lists)]

    def close(self) -> None:
        self.bm25.close()
        self.dense.close()
