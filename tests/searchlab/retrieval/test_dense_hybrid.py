"""Dense retrieval with the real offline MiniLM, and hybrid fusion."""

from __future__ import annotations

import pytest

from searchlab.retrieval.base import Hit, IndexNotFoundError
from searchlab.retrieval.dense import DenseRetriever
from searchlab.retrieval.hybrid import HybridRetriever, fuse, min_max

from .conftest import DOCS, contents

pytestmark = pytest.mark.slow  # a real JVM and index (built once per session)


def test_dense_finds_paraphrases_bm25_cannot(dense, bm25):
    # no word of these queries (after stemming) occurs in the passage it should find
    queries = ["famous Japanese city", "insects making honey", "medicine that kills germs"]
    expected = ["tokyo", "bee", "penicillin"]
    results = dense.search(queries, k=3)
    assert [hits[0].id for hits in results] == expected
    assert all(-1.0 <= h.score <= 1.0 for hits in results for h in hits)
    assert results[0][0].contents == contents("tokyo")
    assert bm25.search(["famous Japanese city"], k=3) == [[]]


def test_dense_returns_at_most_the_corpus(dense):
    [hits] = dense.search(["anything at all"], k=50)
    assert len(hits) == len(DOCS) and len({h.id for h in hits}) == len(DOCS)
    assert dense.search([], k=3) == []


def test_dense_needs_a_dense_index(tmp_path):
    with pytest.raises(IndexNotFoundError, match="index.dense.enabled=true"):
        DenseRetriever(tmp_path)


def hits(*pairs):
    return [Hit(doc_id, f"text of {doc_id}", score) for doc_id, score in pairs]


def test_min_max_and_fuse_by_hand():
    assert min_max(hits(("a", 10.0), ("b", 5.0), ("c", 0.0))) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert min_max(hits(("a", 3.0), ("b", 3.0))) == {"a": 1.0, "b": 1.0}
    sparse = hits(("a", 10.0), ("b", 5.0), ("c", 0.0))
    dense = hits(("c", 0.9), ("d", 0.5), ("a", 0.1))
    # a: .5*1 + .5*0 = .5; b: .25 + 0; c: 0 + .5*1 = .5; d: 0 + .5*.5 = .25  -> ties by id
    fused = fuse(sparse, dense, alpha=0.5, k=4)
    assert [(h.id, h.score) for h in fused] == [("a", 0.5), ("c", 0.5), ("b", 0.25), ("d", 0.25)]
    assert fused[1].contents == "text of c"
    assert [h.id for h in fuse(sparse, dense, alpha=1.0, k=2)] == ["a", "b"]
    assert [h.id for h in fuse(sparse, dense, alpha=0.0, k=2)] == ["c", "d"]
    assert fuse([], [], alpha=0.5, k=3) == []


def test_hybrid_combines_both_retrievers(bm25, dense):
    hybrid = HybridRetriever(bm25, dense, alpha=0.5)
    queries = ["famous Japanese city", "Guido van Rossum", "waggle dance of honey bees"]
    results = hybrid.search(queries, k=3)
    assert [r[0].id for r in results] == ["tokyo", "python", "bee"]  # dense-only, bm25-led, both agree
    assert all(0.0 <= h.score <= 1.0 for r in results for h in r)
    pure_bm25 = HybridRetriever(bm25, dense, alpha=1.0).search(["Guido van Rossum"], k=1)
    assert pure_bm25[0][0].id == bm25.search(["Guido van Rossum"], k=1)[0][0].id
    pure_dense = HybridRetriever(bm25, dense, alpha=0.0).search(["insects making honey"], k=1)
    assert pure_dense[0][0].id == dense.search(["insects making honey"], k=1)[0][0].id


def test_dense_and_hybrid_behind_the_server_match_in_process(dense, bm25):
    from fastapi.testclient import TestClient

    from searchlab.retrieval.server import create_app

    queries = ["famous Japanese city", "Guido van Rossum"]
    for retriever in (dense, HybridRetriever(bm25, dense, alpha=0.5)):  # stored-JSON path and Hit path
        with TestClient(create_app(retriever, max_queries=8, max_topk=5)) as client:
            result = client.post("/retrieve", json={"queries": queries, "topk": 3, "return_scores": True}).json()["result"]
        expected = retriever.search(queries, 3)
        assert [[(e["document"]["id"], e["document"]["contents"], e["score"]) for e in r] for r in result] == \
            [[(h.id, h.contents, h.score) for h in hits] for hits in expected]
