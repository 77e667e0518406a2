"""Shared fixtures of the searchlab tests: one Lucene index per distinct corpus per run, the toy world's tokenizer
and model, and the 400-entity synthetic world.

Indexes and worlds are session-scoped and read-only; what a test may change (a retriever's ``.calls``, a model it
trains) is module-scoped at most, or made fresh by the test. The data and builders are in ``tests/toyworld.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# tests.toyworld imports torch and transformers: imported in the fixtures, so tests that need neither stay light

# ---------------------------------------------------------------- the toy world (tests/toyworld.py)


@pytest.fixture(scope="session")
def toy_index(tmp_path_factory) -> Path:
    """The BM25 index of DOCS, built once per run; ``toy_index.parent / "corpus.jsonl"`` is its corpus."""
    from tests.toyworld import DOCS, build_toy_index

    return build_toy_index(tmp_path_factory.mktemp("toy-world"), DOCS)


@pytest.fixture(scope="session")
def protocol_index(tmp_path_factory) -> Path:
    """The BM25 index of PROTOCOL_DOCS, built once per run."""
    from tests.toyworld import PROTOCOL_DOCS, build_toy_index

    return build_toy_index(tmp_path_factory.mktemp("protocol-world"), PROTOCOL_DOCS)


@pytest.fixture(scope="module")
def bm25(toy_index):
    """A real BM25 retriever over DOCS that records its calls (results unchanged); one per test module."""
    from tests.toyworld import counting_bm25

    with counting_bm25(toy_index) as retriever:
        yield retriever


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and on a busy machine torch's threads wait on each other.

    Not autouse: a module asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tok():
    """The toy BPE tokenizer, the protocol tags as special tokens."""
    from tests.toyworld import make_tokenizer

    return make_tokenizer(tags_special=True)


@pytest.fixture(scope="session")
def model(tok):
    """The random tiny Qwen2 over ``tok``; shared by the session, so no test may train it (make_model a copy)."""
    from tests.toyworld import make_model

    return make_model(tok)


# ---------------------------------------------------------------- the synthetic world


@pytest.fixture(scope="session")
def synth_corpus(tmp_path_factory) -> Path:
    """The corpus folder (corpus.jsonl, kb.jsonl) of a 400-entity world, generated once per run."""
    from searchlab.corpus import generate_world
    from searchlab.params import WorldParams

    corpus = tmp_path_factory.mktemp("world") / "corpus"
    corpus.mkdir()
    generate_world(WorldParams(entities=400, seed=3), corpus)
    return corpus


@pytest.fixture(scope="session")
def synth_index(synth_corpus) -> Path:
    """The Lucene index of ``synth_corpus``, built once per run."""
    from searchlab.params import IndexParams
    from searchlab.retrieval import build_index

    index = synth_corpus.parent / "index"
    index.mkdir()
    build_index(IndexParams(threads=1), synth_corpus / "corpus.jsonl", index)
    return index


@pytest.fixture(scope="session")
def kb(synth_corpus):
    """The KB of ``synth_corpus``; shared by the session, read-only."""
    from searchlab.corpus.kb import KB

    return KB.load(synth_corpus)
