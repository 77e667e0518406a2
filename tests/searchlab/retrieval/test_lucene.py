"""BM25 search over a real Lucene index."""

from __future__ import annotations

import pytest

from searchlab.retrieval.base import Hit, IndexNotFoundError, RetrieverError
from searchlab.retrieval.lucene import BM25Retriever

from .conftest import DOCS, contents

pytestmark = pytest.mark.slow  # a real JVM and index (built once per session)


@pytest.mark.parametrize("query, expected", [
    ("radioactivity Nobel", "curie"),
    ("highest mountain in Africa", "kilimanjaro"),
    ("Guido van Rossum", "python"),
    ("waggle dance", "bee"),
    ("antibiotic discovered by Fleming", "penicillin"),
])
def test_distinctive_query_ranks_its_passage_first(bm25, query, expected):
    [hits] = bm25.search([query], k=3)
    assert hits[0].id == expected
    assert hits[0].contents == contents(expected)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_batch_keeps_query_order_across_threads(bm25):
    queries = ["capital of Japan", "coral reef Queensland", "checkmate grandmaster", "sand dunes desert",
               "symphonies composer deaf", "glucose oxygen sunlight", "river South America"]
    expected = ["tokyo", "reef", "chess", "sahara", "beethoven", "photosynthesis", "amazon"]
    results = bm25.search(queries, k=2)
    assert [hits[0].id for hits in results] == expected
    assert bm25.search(queries[::-1], k=2) == results[::-1]


def test_scores_equal_anserinis_own_searcher(bm25, index_dir):
    # Anserini's searcher on the same folder finds the same documents with the same BM25
    # scores, except that it rounds them to 4 decimals (to break near-ties by id).
    from searchlab.retrieval.jvm import autoclass

    searcher = autoclass("io.anserini.search.SimpleSearcher")(str(index_dir / "bm25"))
    searcher.set_bm25(0.9, 0.4)
    for query in ["largest coral reef", "the capital of Japan", "programming language code", "Africa"]:
        ours = {h.id: h.score for h in bm25.search([query], k=10)[0]}
        theirs = {h.docid: h.score for h in searcher.search(query, 10)}
        assert ours.keys() == theirs.keys() and ours
        assert all(abs(score - theirs[doc]) <= 0.5e-4 + 1e-6 for doc, score in ours.items())
    searcher.close()


def test_concurrent_callers_get_their_own_results(bm25):
    from concurrent.futures import ThreadPoolExecutor

    queries = [["capital of Japan"], ["coral reef", "checkmate"], ["sand dunes"], ["Fleming", "waggle dance", "volcano"]] * 5
    expected = [bm25.search(q, 2) for q in queries]
    with ThreadPoolExecutor(8) as pool:  # merged into shared batches behind the scenes
        assert list(pool.map(lambda q: bm25.search(q, 2), queries)) == expected
    with ThreadPoolExecutor(4) as pool:  # different k in flight at once are batched apart
        ks = [1, 3, 2, 5] * 4
        got = list(pool.map(lambda i: bm25.search(["Africa volcano desert"], ks[i]), range(len(ks))))
    assert [len(g[0]) for g in got] == [min(k, 2) for k in ks]


def test_edge_queries(bm25):
    empty, stop_words, unknown = bm25.search(["", "the of and", "zzqqxx"], k=3)
    assert empty == [] and stop_words == [] and unknown == []
    assert len(bm25.search(["Africa"], k=1000)[0]) == 2  # k above the corpus size returns what matches
    long_query = " ".join(f"term{i}" for i in range(3000)) + " Tokyo"  # beyond Lucene's default 1024 clauses
    assert bm25.search([long_query], k=1)[0][0].id == "tokyo"
    assert bm25.search([], k=3) == []
    assert bm25.num_documents == len(DOCS)


def test_bad_arguments_are_value_errors(bm25):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        bm25.search(["x"], k=0)
    with pytest.raises(ValueError, match=r"queries\[1\] must be a string"):
        bm25.search(["x", 3], k=1)
    with pytest.raises(ValueError, match="must be a list"):
        bm25.search("a single string", k=1)


def test_other_bm25_parameters_and_close(index_dir):
    with BM25Retriever(index_dir, threads=1, k1=1.2, b=0.75) as retriever:
        [hits] = retriever.search(["Amazon river water"], k=1)
        assert hits == [Hit("amazon", contents("amazon"), hits[0].score)]
    with pytest.raises(RetrieverError, match="closed"):
        retriever.search(["x"], k=1)


def test_missing_index_says_how_to_build_it(tmp_path):
    with pytest.raises(IndexNotFoundError, match="searchlab run index"):
        BM25Retriever(tmp_path)



def test_score_ties_are_broken_by_corpus_order():
    """Lucene orders equal scores by internal doc id, which a multi-threaded build assigns in no fixed order;
    the retriever re-sorts them by docstore row so every build of one corpus ranks alike."""
    import numpy as np

    from searchlab.retrieval.lucene import break_ties

    rows, scores = break_ties(np.array([7, 2, 9, 1, 4]), [3.0, 3.0, 2.5, 3.0, 1.0], 4)
    assert rows.tolist() == [1, 2, 7, 9] and scores == [3.0, 3.0, 3.0, 2.5]
    assert break_ties(np.array([], dtype=np.int64), [], 3)[0].tolist() == []
