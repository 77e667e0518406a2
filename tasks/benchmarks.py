"""The benchmarks stage: the held-out suites (FlashRAG JSONL, one per question type), as ``data/benchmarks/``:
``world-*`` for the synthetic world, ``records-*`` for a corpus of your own records."""

from searchlab.synth.benchmarks import write_suites
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    return write_suites(ctx.params.benchmarks, ctx.inputs["qa"], ctx.out_dir, ctx.params.corpus.source)


STAGE = Stage(
    name="benchmarks",
    description="Write the held-out benchmark suites (world-* or records-*) in FlashRAG JSONL",
    upstream=("qa",),
    reads=("benchmarks", "corpus"),  # corpus.source names the suites
    build=_build,
)
