"""Session fixtures: one real index (BM25 + dense MiniLM) of a dozen passages, one JVM, one encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchlab.params import DenseIndexParams, IndexParams

# Twelve passages on unrelated topics, in the corpus format ("Title"\ntext).
DOCS = {
    "curie": ('Marie Curie', 'Marie Curie was a physicist and chemist who conducted pioneering research on radioactivity and won two Nobel Prizes.'),
    "kilimanjaro": ('Mount Kilimanjaro', 'Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa.'),
    "photosynthesis": ('Photosynthesis', 'Plants use photosynthesis to turn sunlight, water and carbon dioxide into glucose and oxygen.'),
    "reef": ('Great Barrier Reef', 'The Great Barrier Reef is the largest coral reef system in the world, off the coast of Queensland, Australia.'),
    "python": ('Python (programming language)', 'Python is a high-level programming language created by Guido van Rossum, known for readable code.'),
    "amazon": ('Amazon River', 'The Amazon river in South America carries more water to the sea than any other river.'),
    "beethoven": ('Ludwig van Beethoven', 'Beethoven was a German composer who wrote nine symphonies and kept composing after he became deaf.'),
    "bee": ('Honey bee', 'Honey bees pollinate flowers, live in hives and tell each other where food is with a waggle dance.'),
    "tokyo": ('Tokyo', 'Tokyo is the capital of Japan and the most populous metropolitan area on Earth.'),
    "penicillin": ('Penicillin', 'Alexander Fleming discovered penicillin, the first antibiotic, in 1928 when mould killed his bacteria.'),
    "sahara": ('Sahara', 'The Sahara is the largest hot desert, covering most of North Africa with sand dunes and rock.'),
    "chess": ('Chess', 'Chess is a board game for two players in which a grandmaster tries to checkmate the opposing king.'),
}


def contents(doc_id: str) -> str:
    title, text = DOCS[doc_id]
    return f'"{title}"\n{text}'


def write_corpus(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    return write_corpus(folder / "corpus.jsonl", [{"id": i, "contents": contents(i)} for i in DOCS])


@pytest.fixture(scope="session")
def built_index(tmp_path_factory, corpus_file) -> tuple[Path, dict]:
    """A real build (subprocess, Anserini, MiniLM): the folder and build_index's summary."""
    from searchlab.retrieval.indexing import build_index

    out = tmp_path_factory.mktemp("index")
    params = IndexParams(threads=2, dense=DenseIndexParams(enabled=True, batch_size=8, max_length=64))
    return out, build_index(params, corpus_file, out)


@pytest.fixture(scope="session")
def index_dir(built_index) -> Path:
    return built_index[0]


@pytest.fixture(scope="session")
def bm25(index_dir):
    from searchlab.retrieval.lucene import BM25Retriever

    with BM25Retriever(index_dir, threads=2) as retriever:
        yield retriever


@pytest.fixture(scope="session")
def dense(index_dir):
    from searchlab.retrieval.dense import DenseRetriever

    with DenseRetriever(index_dir) as retriever:
        yield retriever
