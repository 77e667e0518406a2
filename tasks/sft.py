"""The sft stage: the agent model fine-tuned on the demonstrations (Hugging Face folder), as ``data/sft/``.

Training runs under ``accelerate launch`` (:func:`searchlab.train.sft.run_sft`);
then the trained agent is rolled out on held-out questions, and its protocol
rates and trajectories (``samples.md``, ``samples.jsonl``) go with the run.
"""

from __future__ import annotations

from searchlab.train.base import start_model
from searchlab.train.samples import sample_trained_agent, warn_if_turns_fall_short
from searchlab.train.sft import SFTJob, run_sft
from tasks.stage import Stage, StageContext, registered_as


def _build(ctx: StageContext) -> dict:
    p, demos, corpus = ctx.params, ctx.inputs["qa"] / "demos.jsonl", ctx.inputs["corpus"] / "corpus.jsonl"
    warn_if_turns_fall_short(demos, p.rollout)
    config = ctx.accelerate_config()
    job = SFTJob(model=p.model, sft=p.sft, start=start_model(ctx.inputs["base"]), demos=demos, out_dir=ctx.out_dir,
                 work_dir=ctx.work_dir, corpus=corpus)
    figures = run_sft(job, config)
    return {**figures, **sample_trained_agent("sft", p, ctx.out_dir, ctx.inputs["qa"], ctx.inputs["index"],
                                              p.sft.samples, p.sft.seed)}


STAGE = Stage(
    name="sft",
    description="Fine-tune the agent model on the demonstrations with TRL (loss on the agent's own tokens only)",
    upstream=("corpus", "index", "qa", "base"),
    reads=("model", "sft", "rollout", "retriever"),
    build=_build,
    reports=("samples.md", "samples.jsonl"),
    curves="train_log.jsonl",
    registers=registered_as("sft"),
)
