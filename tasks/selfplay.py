"""The selfplay stage: the policy ``selfplay.init`` names (sft's by default) trained by search self-play (proposer
and solver), as ``data/selfplay/``.

Training runs under ``accelerate launch`` (:func:`searchlab.selfplay.train.run_selfplay`);
then the trained agent answers held-out questions, like the sft and rl stages', for its protocol rates and
sample trajectories.
"""

from __future__ import annotations

from pathlib import Path

from searchlab.corpus.kb import missing_kb
from searchlab.model.gguf import PACKAGED, gguf_file
from searchlab.params import Params
from searchlab.selfplay.train import SelfPlayJob, run_selfplay
from searchlab.train.launch import check_device
from searchlab.train.samples import sample_trained_agent
from tasks.sources import external_models, resolve, stage_of
from tasks.stage import Stage, StageContext, registered_as


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    check_device(p.selfplay.use_vllm, "selfplay.use_vllm")
    config = ctx.accelerate_config()
    start = resolve(p.selfplay.init, "selfplay.init", p, ctx.root, ctx.inputs)
    job = SelfPlayJob(model=p.model, rollout=p.rollout, selfplay=p.selfplay, qa=p.qa, retriever=p.retriever,
                      start=start, corpus=ctx.inputs["corpus"], qa_dir=ctx.inputs["qa"], index=ctx.inputs["index"],
                      out_dir=ctx.out_dir, work_dir=ctx.work_dir, proposer=proposer(p, ctx.root, ctx.inputs))
    figures = run_selfplay(job, config)
    samples = sample_trained_agent("selfplay", p, ctx.out_dir, ctx.inputs["qa"], ctx.inputs["index"],
                                   p.selfplay.samples, p.selfplay.seed)
    return {**figures, **samples}


def proposer(params: Params, root: Path, stage_dirs: dict[str, Path]) -> str | None:
    """What loads as the frozen proposer ``selfplay.proposer`` names: a model folder, or a GGUF file or packaged
    checkpoint as named; None when the policy proposes."""
    source = params.selfplay.proposer
    if source == "policy":
        return None
    if gguf_file(source, root) is not None:
        return source if source in PACKAGED else str(root / source)
    return str(resolve(source, "selfplay.proposer", params, root, stage_dirs))


def _model_sources(params: Params) -> dict[str, str]:
    """``{key: source}`` of the models self-play loads: its policy and, unless the policy proposes, its proposer."""
    s = params.selfplay
    return {"selfplay.init": s.init, **({"selfplay.proposer": s.proposer} if s.proposer != "policy" else {})}


def upstream(params: Params) -> tuple[str, ...]:
    """The corpus, index and qa stages, and the stages ``selfplay.init`` and ``selfplay.proposer`` name."""
    stages = [stage_of(source) for source in _model_sources(params).values()]
    return ("corpus", "index", "qa", *dict.fromkeys(stage for stage in stages if stage))


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """The starting policy and the proposer where they name a folder or a registry reference (a GGUF file or a
    packaged checkpoint is named by the params, and its package's pinned version)."""
    sources = {key: source for key, source in _model_sources(params).items() if gguf_file(source, root) is None}
    return external_models(sources, params, root)


def rules(params: Params):
    """The KB filter needs a knowledge base."""
    no_kb = missing_kb(params.corpus.source)
    if params.selfplay.kb_filter and no_kb:
        yield "selfplay.kb_filter", f"the KB filter checks proposals against the knowledge base, and {no_kb}"


STAGE = Stage(
    name="selfplay",
    description="Train the agent by search self-play: it proposes questions, retrieval verifies them, it solves them",
    upstream=upstream,
    # qa: held-out answers are never seeds (the qa params decide which), and novelty is against its questions
    reads=("model", "selfplay", "rollout", "retriever", "qa"),
    build=_build,
    reports=("samples.md", "samples.jsonl", "datasheet.md", "rounds.jsonl"),
    curves="train_log.jsonl",
    registers=registered_as("selfplay"),
    external=external_inputs,
    rules=rules,
)
