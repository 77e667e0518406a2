"""The base stage: the model training starts from (the tiny model's tokenizer and pretraining), as ``data/base/``."""

from searchlab.train.base import build_base
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    return build_base(ctx.params.model, ctx.inputs["corpus"] / "corpus.jsonl", ctx.inputs["qa"] / "demos.jsonl",
                      ctx.out_dir, ctx.work_dir)


STAGE = Stage(
    name="base",
    description="The model training starts from: the tiny model's tokenizer and pretraining, or a checkpoint's name",
    upstream=("corpus", "qa"),
    reads=("model",),
    build=_build,
)
