"""After a training stage: its trained agent rolled out on a few held-out questions, for its protocol rates.

The sft, rl and selfplay stages each end here (:func:`sample_trained_agent`):
the agent answers held-out questions (the qa stage's ``heldout.jsonl``; its dev
questions where there are none, as for questions read from files), and its
trajectories (``samples.md``, ``samples.jsonl``) and rates go with the run
(:mod:`searchlab.agent.samples`). :func:`warn_if_turns_fall_short` checks, before
SFT, that the rollouts give its demonstrations the turns they need.
"""

from __future__ import annotations

import logging
from pathlib import Path

from searchlab.agent.protocol import parse_trajectory
from searchlab.agent.samples import spread_sample, write_samples
from searchlab.jsonl import iter_jsonl
from searchlab.params import Params, RolloutParams
from searchlab.questions.record import read_questions

log = logging.getLogger("searchlab.sft")
AGENTS = {"sft": "SFT", "rl": "RL", "selfplay": "self-play"}  # how each training stage's report names its agent


def sample_trained_agent(stage: str, params: Params, model_dir: Path, qa_dir: Path, index_dir: Path, count: int,
                         seed: int) -> dict:
    """Roll the agent training stage ``stage`` saved in ``model_dir`` out on ``count`` held-out questions of
    ``qa_dir`` (spread over their types, drawn with ``seed``), writing its samples into ``model_dir``; its protocol
    rates as ``protocol.*`` counts (none when there is no question)."""
    from searchlab.model import load_agent
    from searchlab.retrieval import open_retriever

    heldout = read_questions(qa_dir / "heldout.jsonl") or read_questions(qa_dir / "dev.jsonl")
    questions = spread_sample(heldout, count, seed)
    if not questions:
        return {}
    model, tokenizer = load_agent(str(model_dir), params.model, params.rollout)
    with open_retriever(params.retriever, index_dir) as retriever:
        rates = write_samples(model, tokenizer, retriever, questions, params.rollout, model_dir,
                              f"The {AGENTS[stage]} agent on {len(questions)} held-out questions")
    evidence = f", found the evidence {100 * rates['found_evidence']:.0f}%" if "found_evidence" in rates else ""
    log.info("%s: on %d held-out questions the agent searched in %.0f%%, well-formed %.0f%%%s, answered %.0f%% "
             "(exact match %.0f%%)", stage, len(questions), 100 * rates["searched"],
             100 * rates["well_formed"], evidence, 100 * rates["answered"], 100 * rates["exact_match"])
    return {f"protocol.{name}": value for name, value in rates.items()}


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
