"""The benchmarks stage: the held-out world suites (FlashRAG JSONL, one per question type), as ``data/benchmarks/``."""

from searchlab.synth import write_suites
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    return write_suites(ctx.params.benchmarks, ctx.inputs["qa"], ctx.out_dir)


STAGE = Stage(
    name="benchmarks",
    description="Write the held-out world-* benchmark suites in FlashRAG JSONL",
    upstream=("qa",),
    reads=("benchmarks",),
    build=_build,
)
