"""The corpus stage: the synthetic world or an imported corpus, as ``data/corpus/``."""

from searchlab.corpus import build_corpus
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    return build_corpus(ctx.params.corpus, ctx.root, ctx.out_dir)


STAGE = Stage(
    name="corpus",
    description="Generate the synthetic encyclopedia (corpus.jsonl, kb.jsonl) or import a real corpus",
    upstream=(),
    reads=("corpus",),
    build=_build,
)
