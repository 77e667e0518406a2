"""The sft stage: the agent model fine-tuned on the demonstrations (Hugging Face folder), as ``data/sft/``.

Training runs under ``accelerate launch`` (:func:`searchlab.train.sft.run_sft`);
then the trained agent is rolled out on held-out questions, and its protocol
rates and trajectories (``samples.md``, ``samples.jsonl``) go with the run.
"""

from __future__ import annotations

import logging
from pathlib import Path

from searchlab.agent.protocol import parse_trajectory
from searchlab.agent.samples import spread_sample, write_samples
from searchlab.jsonl import iter_jsonl, read_jsonl
from searchlab.model import load_agent
from searchlab.params import RolloutParams
from searchlab.retrieval import open_retriever
from searchlab.train.base import start_model
from searchlab.train.sft import SFTJob, run_sft
from tasks.stage import Stage, StageContext, registered_as

log = logging.getLogger("searchlab.sft")


def _build(ctx: StageContext) -> dict:
    p, demos, corpus = ctx.params, ctx.inputs["qa"] / "demos.jsonl", ctx.inputs["corpus"] / "corpus.jsonl"
    warn_if_turns_fall_short(demos, p.rollout)
    config = ctx.accelerate_config()
    job = SFTJob(model=p.model, sft=p.sft, start=start_model(ctx.inputs["base"]), demos=demos, out_dir=ctx.out_dir,
                 work_dir=ctx.work_dir, corpus=corpus)
    figures = run_sft(job, config)
    return {**figures, **sample_trajectories(ctx, p.sft.samples, p.sft.seed, "SFT")}


def warn_if_turns_fall_short(demos: Path, rollout: RolloutParams) -> int:
    """Warn when a demonstration searches so often that ``rollout.max_turns`` would cut its episode off.

    An episode of n searches needs n + 1 turns (the last one answers); with
    fewer, the agent is taught questions it can never finish in a rollout.
    Returns the most searches any demonstration makes.
    """
    most = max((len(parse_trajectory(record["completion"]).searches) for _, record in iter_jsonl(demos)), default=0)
    if most + 1 > rollout.max_turns:
        log.warning("sft: %s has demonstrations of %d searches, but rollout.max_turns is %d: their episodes are "
                    "cut off before the answer; set rollout.max_turns to at least %d", demos, most,
                    rollout.max_turns, most + 1)
    return most


def sample_trajectories(ctx: StageContext, count: int, seed: int, who: str) -> dict:
    """Roll the stage's trained agent out on ``count`` held-out questions (the dev questions when there are none:
    questions read from files); protocol rates as ``protocol.*`` counts."""
    p = ctx.params
    heldout = read_jsonl(ctx.inputs["qa"] / "heldout.jsonl") or read_jsonl(ctx.inputs["qa"] / "dev.jsonl")
    questions = spread_sample(heldout, count, seed)
    if not questions:
        return {}
    model, tokenizer = load_agent(str(ctx.out_dir), p.model, p.rollout)
    with open_retriever(p.retriever, ctx.inputs["index"]) as retriever:
        rates = write_samples(model, tokenizer, retriever, questions, p.rollout, ctx.out_dir,
                              f"The {who} agent on {len(questions)} held-out questions")
    evidence = f", found the evidence {100 * rates['found_evidence']:.0f}%" if "found_evidence" in rates else ""
    log.info("%s: on %d held-out questions the agent searched in %.0f%%, well-formed %.0f%%%s, answered %.0f%% "
             "(exact match %.0f%%)", ctx.name, len(questions), 100 * rates["searched"], 100 * rates["well_formed"],
             evidence, 100 * rates["answered"], 100 * rates["exact_match"])
    return {f"protocol.{name}": value for name, value in rates.items()}


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
