"""The Coalescer merges concurrent calls into shared batches of bounded size without mixing up or failing each
other's results; the server's request batcher bounds its rounds alike."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from searchlab.retrieval.base import Hit
from searchlab.retrieval.batching import RequestBatcher
from searchlab.retrieval.coalesce import Coalescer


class Echo:
    """A batch function that answers each query with (query, k) and records the batches it saw."""

    def __init__(self, delay: float = 0.05):
        self.batches: list[tuple[list[str], int]] = []
        self.delay = delay
        self.lock = threading.Lock()

    def __call__(self, queries: list[str], k: int) -> list:
        with self.lock:
            self.batches.append((list(queries), k))
        if any(q.startswith("bad") for q in queries):
            raise ValueError(f"cannot search {[q for q in queries if q.startswith('bad')]}")
        time.sleep(self.delay)  # long enough for the other callers to queue up
        return [(q, k) for q in queries]


def test_concurrent_calls_share_batches_and_get_their_own_answers():
    echo = Echo()
    coalescer = Coalescer(echo)
    calls = [[f"q{i}a", f"q{i}b"] for i in range(12)]
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda qs: coalescer.search(qs, 3), calls))
    assert answers == [[(q, 3) for q in qs] for qs in calls]
    assert len(echo.batches) < len(calls)  # merged: the first batch runs alone, the rest queue behind it
    assert sorted(q for batch, _ in echo.batches for q in batch) == sorted(q for qs in calls for q in qs)


def test_different_k_are_batched_apart():
    echo = Echo()
    coalescer = Coalescer(echo)
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: coalescer.search([f"q{i}"], 1 + i % 2), range(6)))
    assert answers == [[(f"q{i}", 1 + i % 2)] for i in range(6)]
    for batch, k in echo.batches:  # every batch holds one k only
        assert all(int(q[1:]) % 2 == k - 1 for q in batch)


def test_a_failing_call_does_not_fail_the_others_in_its_batch():
    echo = Echo(delay=0.1)
    coalescer = Coalescer(echo)
    names = ["slow-first", "good1", "bad-one", "good2", "good3"]

    def call(name):
        try:
            return coalescer.search([name], 2)
        except ValueError as err:
            return str(err)

    with ThreadPoolExecutor(5) as pool:
        first = pool.submit(call, names[0])
        time.sleep(0.03)  # the rest arrive while the first batch runs: they share the next one
        rest = list(pool.map(call, names[1:]))
    assert first.result() == [("slow-first", 2)]
    assert rest == [[("good1", 2)], "cannot search ['bad-one']", [("good2", 2)], [("good3", 2)]]
    assert any(len(batch) == 4 for batch, _ in echo.batches)  # they were merged, then retried alone


def test_a_lone_failing_call_raises():
    with pytest.raises(ValueError, match="bad"):
        Coalescer(Echo(delay=0)).search(["bad"], 1)


def test_merged_batches_stay_within_the_hit_cap_and_every_caller_gets_its_own():
    echo = Echo()
    coalescer = Coalescer(echo, max_hits=12)  # 4 queries at k=3
    # 16 callers of 1-3 queries, and one of 5 queries: 15 hits, over the cap on its own
    calls = [[f"q{i}-{j}" for j in range(1 + i % 3)] for i in range(16)] + [[f"big{j}" for j in range(5)]]
    with ThreadPoolExecutor(len(calls)) as pool:
        answers = list(pool.map(lambda queries: coalescer.search(queries, 3), calls))
    assert answers == [[(q, 3) for q in queries] for queries in calls]
    batches = [queries for queries, _ in echo.batches]
    assert all(len(b) * 3 <= 12 for b in batches if b != calls[-1]) and calls[-1] in batches  # the big one alone
    assert any(len({q.split("-")[0] for q in b}) > 1 for b in batches if b != calls[-1])  # calls were merged
    assert sorted(q for b in batches for q in b) == sorted(q for queries in calls for q in queries)


def test_the_server_s_request_batcher_bounds_each_round_by_the_same_cap():
    class Recording:
        """A retriever answering each query with one hit per rank, recording the hits of each search."""

        def __init__(self):
            self.hits: list[int] = []

        def search(self, queries, k):
            self.hits.append(len(queries) * k)
            time.sleep(0.02)
            return [[Hit(f"{q}#{rank}", q, float(-rank)) for rank in range(k)] for q in queries]

    retriever = Recording()
    batcher = RequestBatcher(retriever, max_hits=12)
    requests = [([f"r{i}a", f"r{i}b"], 3) for i in range(20)] + [([f"big{j}" for j in range(5)], 3)]  # 6 hits, 15

    async def ask_all():
        return await asyncio.gather(*(batcher.answer(queries, topk, False) for queries, topk in requests))

    answers = asyncio.run(ask_all())
    for (queries, topk), body in zip(requests, answers):
        expected = [[{"id": f"{q}#{rank}", "contents": q} for rank in range(topk)] for q in queries]
        assert orjson.loads(body)["result"] == expected
    assert sum(retriever.hits) == sum(len(q) * k for q, k in requests)
    assert sorted(retriever.hits)[-2:] == [12, 15] and retriever.hits.count(15) == 1  # merged, and the big one alone
    assert retriever.hits[-1] == 15  # in arrival order: the big request, last, waited its turn
