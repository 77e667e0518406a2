"""open_retriever: the params decide the retriever; a missing index is a clear error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from searchlab.params import RetrieverParams
from searchlab.retrieval import IndexNotFoundError, open_retriever
from searchlab.retrieval.client import HttpRetriever
from searchlab.retrieval.hybrid import HybridRetriever
from searchlab.retrieval.lucene import BM25Retriever


def test_methods_map_to_retrievers(index_dir, dense):
    with open_retriever(RetrieverParams(method="bm25", threads=1), index_dir) as r:
        assert isinstance(r, BM25Retriever) and r.search(["Tokyo"], 1)[0][0].id == "tokyo"
    with open_retriever(RetrieverParams(method="hybrid", hybrid_alpha=0.3), index_dir) as r:
        assert isinstance(r, HybridRetriever) and r.alpha == 0.3
        assert r.search(["famous Japanese city"], 1)[0][0].id == "tokyo"


def test_url_means_http(tmp_path):
    r = open_retriever(RetrieverParams(url="http://127.0.0.1:9/retrieve"), tmp_path)
    assert isinstance(r, HttpRetriever) and r.endpoint == "http://127.0.0.1:9/retrieve"
    r.close()


def test_missing_index_names_the_command(tmp_path):
    with pytest.raises(IndexNotFoundError, match=r"no retrieval index at .* run `searchlab run index`"):
        open_retriever(RetrieverParams(), tmp_path / "index")


def test_importing_the_package_loads_neither_java_nor_torch():
    code = "import sys, searchlab.retrieval; print(sorted(m for m in ('jnius', 'torch', 'fastapi', 'faiss') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
