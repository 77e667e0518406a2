"""Session fixtures: the real synthetic world (corpus, KB, Lucene index; tests/searchlab/conftest.py's, one per run)
and one real synthesis run over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchlab.params import RetrieverParams
from searchlab.synth.config import QAParams

RETRIEVER = RetrieverParams(threads=1)


@pytest.fixture(scope="session")
def world(synth_corpus, synth_index) -> tuple[Path, Path]:
    """(corpus folder, index folder) of a 400-entity world."""
    return synth_corpus, synth_index


@pytest.fixture(scope="session")
def synthesized(world, tmp_path_factory) -> tuple[Path, dict]:
    """(output folder, counts) of synthesis with the default params in shards of 100 targets."""
    from searchlab.synth.pipeline import synthesize

    out = tmp_path_factory.mktemp("qa")
    counts = synthesize(QAParams(shard_size=100), RETRIEVER, world[0], world[1], out, out.parent / (out.name + "-work"))
    return out, counts
