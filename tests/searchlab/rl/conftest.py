"""The rl tests' world: their questions and corpus files and a BM25 retriever over the session's index of
tests/toyworld.py's DOCS; and their tokenizer."""

from __future__ import annotations

import json

import pytest

from tests.searchlab.rl.rlworld import QUESTIONS, searching_policy
from tests.toyworld import DOCS, make_tokenizer, write_corpus


@pytest.fixture(scope="module")
def world(tmp_path_factory, bm25):
    """(train.jsonl, corpus.jsonl, retriever): the rl stage's questions and corpus files, and
    tests/searchlab/conftest.py's bm25 (one per module, over the index built once per run)."""
    folder = tmp_path_factory.mktemp("rl-world")
    questions, corpus = folder / "train.jsonl", folder / "corpus.jsonl"
    questions.write_text("".join(json.dumps({"id": i, "question": q, "answers": a, "evidence": e, "type": "single",
                                             "features": {"bucket": b}}) + "\n" for i, q, a, e, b in QUESTIONS))
    write_corpus(corpus, DOCS)
    return questions, corpus, bm25


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer(tags_special=True)


@pytest.fixture(scope="module")
def searching_model(world, tokenizer):
    """rlworld's ``searching_policy``: a tiny model whose episodes search or answer about evenly, so a group's
    episodes earn different rewards whatever the random stream (tests that need a gradient train from it)."""
    questions, _, retriever = world
    return searching_policy(tokenizer, retriever, questions)
