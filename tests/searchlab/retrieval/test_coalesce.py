"""The Coalescer merges concurrent calls into shared batches without mixing up or failing each other's results."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

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
