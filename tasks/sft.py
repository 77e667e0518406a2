"""The sft stage: the agent model fine-tuned on the demonstrations (Hugging Face folder), as ``data/sft/``."""

from __future__ import annotations

from searchlab.model import load_model
from searchlab.params import Params
from searchlab.train.sft import base_model, train_sft
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    p, demos = ctx.params, ctx.inputs["qa"] / "demos.jsonl"
    start = base_model(p.model, ctx.inputs["corpus"] / "corpus.jsonl", demos, ctx.work_dir / "base")
    model, tokenizer = load_model(start, p.model.trust_remote_code, p.model.dtype)
    figures = train_sft(p.sft, model, tokenizer, demos, ctx.out_dir, ctx.work_dir / "checkpoints")
    return {**figures, "parameters": sum(t.numel() for t in model.parameters())}


def _registry(params: Params) -> tuple[str, str]:
    return params.sft.registry_name, params.sft.registry_alias


STAGE = Stage(
    name="sft",
    description="Fine-tune the agent model on the demonstrations with TRL (loss on the agent's own tokens only)",
    upstream=("corpus", "qa"),
    reads=("model", "sft"),
    code=("searchlab.train", "searchlab.model", "searchlab.agent", "tasks.sft"),
    build=_build,
    curves="train_log.jsonl",
    registers=_registry,
)
