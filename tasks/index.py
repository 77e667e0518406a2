"""The index stage: a Lucene BM25 index (and optionally a FAISS dense index) of the corpus, as ``data/index/``."""

from searchlab.retrieval.indexing import build_index
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    return build_index(ctx.params.index, ctx.inputs["corpus"] / "corpus.jsonl", ctx.out_dir)


STAGE = Stage(
    name="index",
    description="Index the corpus with pyserini (Lucene BM25) and, if enabled, a FAISS dense index",
    upstream=("corpus",),
    reads=("index",),
    code=("searchlab.retrieval.indexing", "searchlab.retrieval.jvm", "searchlab.retrieval.dense", "tasks.index"),
    build=_build,
)
