"""The sft stage: the agent model fine-tuned on the demonstrations (Hugging Face folder), as ``data/sft/``."""

from __future__ import annotations

from searchlab.jsonl import iter_jsonl
from searchlab.model import bootstrap_tiny, load_model
from searchlab.params import Params
from searchlab.train.sft import train_sft
from tasks.stage import Stage, StageContext


def _base_model(ctx: StageContext) -> str:
    """The model SFT starts from: ``model.name_or_path``, or for ``tiny`` one built from the data (once per run;
    it is deterministic, so a resumed run rebuilds the same one)."""
    if ctx.params.model.name_or_path != "tiny":
        return ctx.params.model.name_or_path
    base = ctx.work_dir / "base"
    if not (base / "config.json").is_file():
        passages = (r["contents"] for _, r in iter_jsonl(ctx.inputs["corpus"] / "corpus.jsonl"))
        demos = (d["prompt"] + d["completion"] for _, d in iter_jsonl(ctx.inputs["qa"] / "demos.jsonl"))
        bootstrap_tiny(ctx.params.model.tiny, (text for source in (passages, demos) for text in source), base)
    return str(base)


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    model, tokenizer = load_model(_base_model(ctx), p.model.trust_remote_code, p.model.dtype)
    figures = train_sft(p.sft, model, tokenizer, ctx.inputs["qa"] / "demos.jsonl", ctx.out_dir,
                        ctx.work_dir / "checkpoints")
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
