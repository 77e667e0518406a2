"""Shared helper: a real BM25 index of a few documents, searched by a retriever that records its calls."""

from __future__ import annotations

import json


def counting_bm25(tmp_path_factory, docs: dict[str, tuple[str, str]]):
    """A BM25 retriever over ``docs`` (``{id: (title, text)}``) built with Anserini; ``.calls`` lists every
    ``search`` call (results unchanged). Use it as a context manager."""
    from searchlab.params import IndexParams
    from searchlab.retrieval.indexing import build_index
    from searchlab.retrieval.lucene import BM25Retriever

    class CountingBM25(BM25Retriever):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.calls: list[tuple[list[str], int]] = []

        def search(self, queries, k):
            self.calls.append((list(queries), k))
            return super().search(queries, k)

    corpus = tmp_path_factory.mktemp("agent-corpus") / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "contents": f'"{t}"\n{x}'}) + "\n" for i, (t, x) in docs.items()))
    out = tmp_path_factory.mktemp("agent-index")
    build_index(IndexParams(threads=1), corpus, out)
    return CountingBM25(out, threads=1)
