"""The record of one agent episode (:class:`Rollout`): what the rollout engines write, and rewards, evaluation and
training read. It sits below the engines (:mod:`searchlab.agent.rollout`, :mod:`searchlab.agent.continuous`) so
neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Rollout:
    """One question's episode: texts, token ids with the environment mask, and what the model did.

    ``completion`` is everything after the prompt (model turns and environment
    text); ``env_mask[i]`` is 1 when ``completion_ids[i]`` was inserted by the
    environment, 0 when the model generated it. ``answer`` is the final answer
    (``None`` when the episode was cut off at ``max_turns``); ``proposed`` is a
    self-play proposer's ``<question>``, which ends its episode the same way
    (``None`` otherwise; ``question`` is what the prompt asks or gives). ``searches`` are the
    queries of the model's search actions, in order; a search in the last allowed
    turn is listed but not run (nothing would read its results).
    ``retrieved[j]`` are the ids of the passages the ``j``-th search that ran
    returned (what its information block shows, before any token-budget cut).
    ``invalid_actions`` counts turns that neither searched nor answered.
    ``generated_tokens`` counts model tokens only. ``seconds`` is the time from
    the start of the question's batch until it left the batch. ``logprobs``: the
    sampling log-probability of each model token, in order (``generated_tokens``
    of them), as a vLLM engine reports it; None where the engine reports none
    (Hugging Face generation).
    """

    question: str
    prompt: str
    completion: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    answer: str | None = None
    proposed: str | None = None
    searches: list[str] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)
    turns: int = 0
    generated_tokens: int = 0
    invalid_actions: int = 0
    finished: bool = False
    seconds: float | None = None
    logprobs: list[float] | None = None
