"""The evaluation tests use the agent tests' tiny model, tokenizer and BM25 index (tests/searchlab/conftest.py's
fixtures tok, model and bm25), and one torch thread in every module."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_thread):
    """tests/searchlab/conftest.py's one_thread, for every evaluation test module."""
    yield
