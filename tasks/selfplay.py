"""The selfplay stage: the policy ``selfplay.init`` names (sft's by default) trained by search self-play (proposer
and solver), as ``data/selfplay/``.

Training runs under ``accelerate launch`` (:func:`searchlab.selfplay.train.run_selfplay`);
then the trained agent answers held-out questions, like the sft and rl stages', for its protocol rates and
sample trajectories.
"""

from __future__ import annotations

from pathlib import Path

from searchlab.params import Params
from searchlab.rl.train import check_device
from searchlab.selfplay.train import run_selfplay
from tasks.sft import sample_trajectories
from tasks.sources import external_models, resolve, stage_of
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    check_device(p.selfplay.as_rl())
    config = str(ctx.root / p.selfplay.accelerate_config) if p.selfplay.accelerate_config else None
    start = resolve(p.selfplay.init, "selfplay.init", p, ctx.root, ctx.inputs)
    figures = run_selfplay(p.model, p.rollout, p.selfplay, p.qa, start, ctx.inputs["corpus"],
                           ctx.inputs["qa"], ctx.inputs["index"], p.section("retriever"), ctx.out_dir, ctx.work_dir,
                           config)
    return {**figures, **sample_trajectories(ctx, p.selfplay.samples, p.selfplay.seed, "self-play")}


def upstream(params: Params) -> tuple[str, ...]:
    """The corpus, index and qa stages, and the stage ``selfplay.init`` names (if a stage)."""
    start = stage_of(params.selfplay.init)
    return ("corpus", "index", "qa", *((start,) if start else ()))


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """The starting policy when ``selfplay.init`` names a folder or a registry reference."""
    return external_models({"selfplay.init": params.selfplay.init}, params, root)


def _registry(params: Params) -> tuple[str, str]:
    return params.selfplay.registry_name, params.selfplay.registry_alias


STAGE = Stage(
    name="selfplay",
    description="Train the agent by search self-play: it proposes questions, retrieval verifies them, it solves them",
    upstream=upstream,
    # qa: held-out answers are never seeds (the qa params decide which), and novelty is against its questions
    reads=("model", "selfplay", "rollout", "retriever", "qa"),
    build=_build,
    reports=("samples.md", "samples.jsonl", "datasheet.md", "rounds.jsonl"),
    curves="train_log.jsonl",
    registers=_registry,
    external=external_inputs,
)
