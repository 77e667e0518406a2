"""Session fixtures: one real synthetic world (corpus, KB, Lucene index) and one real synthesis run over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchlab.corpus import generate_world
from searchlab.params import IndexParams, QAParams, RetrieverParams, WorldParams
from searchlab.retrieval import build_index

RETRIEVER = RetrieverParams(threads=1)


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> tuple[Path, Path]:
    """(corpus folder, index folder) of a 400-entity world."""
    root = tmp_path_factory.mktemp("world")
    corpus, index = root / "corpus", root / "index"
    corpus.mkdir()
    index.mkdir()
    generate_world(WorldParams(entities=400, seed=3), corpus)
    build_index(IndexParams(threads=1), corpus / "corpus.jsonl", index)
    return corpus, index


@pytest.fixture(scope="session")
def kb(world):
    from searchlab.synth.kb import KB

    return KB.load(world[0])


@pytest.fixture(scope="session")
def synthesized(world, tmp_path_factory) -> tuple[Path, dict]:
    """(output folder, counts) of synthesis with the default params in shards of 100 targets."""
    from searchlab.synth import synthesize

    out = tmp_path_factory.mktemp("qa")
    counts = synthesize(QAParams(shard_size=100), RETRIEVER, world[0], world[1], out, out.parent / (out.name + "-work"))
    return out, counts
