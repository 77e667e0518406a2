"""The qa stage: BMGQ-style question synthesis, demonstrations and held-out questions, as ``data/qa/``."""

from searchlab.synth import synthesize
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    return synthesize(ctx.params.qa, ctx.params.retriever, ctx.inputs["corpus"], ctx.inputs["index"],
                      ctx.out_dir, ctx.work_dir)


STAGE = Stage(
    name="qa",
    description="Synthesize verified multi-hop questions, SFT demonstrations and held-out questions from the KB",
    upstream=("corpus", "index"),
    reads=("qa", "retriever"),
    build=_build,
    reports=("datasheet.md", "stats.json"),
)
