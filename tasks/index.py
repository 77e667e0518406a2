"""The index stage: a Lucene BM25 index (and optionally a FAISS dense index) of the corpus, as ``data/index/``."""

from searchlab.params import flatten
from searchlab.retrieval.indexing import build_index
from tasks.stage import TIMINGS, Stage, StageContext


def _build(ctx: StageContext) -> dict:
    summary = build_index(ctx.params.index, ctx.inputs["corpus"] / "corpus.jsonl", ctx.out_dir)
    # The full summary stays in data/index/index_info.json; the manifest and MLflow get the sizes.
    return {k: v for k, v in flatten(summary).items()
            if k in ("documents", "dense_documents", "skipped_empty") or k.startswith("bytes.")}


STAGE = Stage(
    name="index",
    description="Index the corpus with pyserini (Lucene BM25) and, if enabled, a FAISS dense index",
    upstream=("corpus",),
    reads=("index",),
    build=_build,
    # Lucene's own bytes differ between two builds of one corpus; index_info.json's term statistics and the
    # document store stand for them in the content hash, and the folder's sizes are measurements
    unhashed=("bm25",),
    measured=(*TIMINGS, "bytes.bm25"),
)
