"""The rl stage: the agent trained with GRPO over its own search episodes from the sft policy, as ``data/rl/``.

It trains on the question sets ``rl.questions`` names: the qa stage's training questions, the selfplay stage's
verified questions, or both (gathered into the stage's work folder).

Training runs under ``accelerate launch`` (:func:`searchlab.rl.train.run_rl`);
then the trained agent answers held-out questions, like the sft stage's, for
its protocol rates and sample trajectories.
"""

from __future__ import annotations

from searchlab.params import Params
from searchlab.rl.train import check_device, gather_questions, run_rl
from tasks.sft import sample_trajectories
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    check_device(p.rl)
    config = str(ctx.root / p.rl.accelerate_config) if p.rl.accelerate_config else None
    files = {"qa": ctx.inputs["qa"] / "train.jsonl", "selfplay": ctx.inputs["selfplay"] / "questions.jsonl"}
    questions = ctx.work_dir / "questions.jsonl"
    counts = gather_questions({name: files[name] for name in p.rl.questions}, questions)
    figures = run_rl(p.model, p.rollout, p.rl, ctx.inputs["sft"], questions, ctx.inputs["corpus"] / "corpus.jsonl",
                     ctx.inputs["index"], p.section("retriever"), ctx.out_dir, ctx.work_dir, config)
    return {**counts, **figures, **sample_trajectories(ctx, p.rl.samples, p.rl.seed, "RL")}


def _registry(params: Params) -> tuple[str, str]:
    return params.rl.registry_name, params.rl.registry_alias


STAGE = Stage(
    name="rl",
    description="Train the agent with GRPO (TRL) over its own multi-turn search episodes, from the sft policy",
    # selfplay: its questions are a training set (rl.questions); the rl policy still starts from sft
    upstream=("corpus", "index", "qa", "sft", "selfplay"),
    reads=("model", "rl", "rollout", "retriever"),
    build=_build,
    reports=("samples.md", "samples.jsonl", "curves.png", "curriculum.jsonl"),
    curves="train_log.jsonl",
    registers=_registry,
)
