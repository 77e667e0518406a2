"""The systems evaluation compares, all played by one model through the agent's batched rollouts.

* ``direct``: closed book. The agent's prompt, one turn: the model answers from
  what it knows; a search it asks for is never run.
* ``rag``: one-shot retrieval. The question itself is searched, and the prompt
  shows that search and its ``params.topk`` passages exactly as the environment
  would have appended them; then one turn to answer (a further search is not
  run). The model sees the protocol it was trained on, so a difference to
  ``agent`` comes from what retrieval found, not from an unfamiliar format.
* ``agent``: the multi-turn search agent (:func:`searchlab.agent.rollout.rollout`).

Every system decodes with the same ``RolloutParams`` (temperature, top-p, new
tokens per turn, passages per search, information budget); only ``max_turns``
is 1 for ``direct`` and ``rag``.
"""

from __future__ import annotations

from typing import Any

from searchlab.agent.protocol import (
    SEARCH_CLOSE,
    SEARCH_OPEN,
    information_block,
    instruction,
)
from searchlab.agent.rollout import Rollout, encode_completion, rollout
from searchlab.params import RolloutParams
from searchlab.retrieval.base import Retriever

SYSTEMS = ("direct", "rag", "agent")


def rag_prompts(tokenizer: Any, retriever: Retriever, questions: list[str],
                params: RolloutParams) -> tuple[list[str], list[list[str]]]:
    """The ``rag`` prompts (the question searched, its passages shown) and the ids of the passages shown.

    All questions go to ``retriever`` in one call.
    """
    results = retriever.search(questions, params.topk)
    prompts = [instruction(question) + f"{SEARCH_OPEN} {question.strip()} {SEARCH_CLOSE}"
               + information_block(hits, params.max_information_tokens,
                                   lambda text: len(encode_completion(tokenizer, text)))
               for question, hits in zip(questions, results)]
    return prompts, [[hit.id for hit in hits] for hits in results]


def run_system(system: str, model: Any, tokenizer: Any, retriever: Retriever, questions: list[str],
               params: RolloutParams) -> list[Rollout]:
    """One :class:`Rollout` per question of ``system`` (one of :data:`SYSTEMS`), in order.

    For ``rag`` the passages shown in the prompt count as the episode's first
    retrieval (``Rollout.retrieved[0]``), so evidence is measured alike for
    every system.
    """
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")
    if system == "agent":
        return rollout(model, tokenizer, retriever, questions, params)
    one_turn = params.model_copy(update={"max_turns": 1})
    if system == "direct":
        return rollout(model, tokenizer, retriever, questions, one_turn)
    prompts, shown = rag_prompts(tokenizer, retriever, questions, params)
    episodes = rollout(model, tokenizer, retriever, questions, one_turn, prompts)
    for episode, ids in zip(episodes, shown):
        episode.retrieved.insert(0, ids)
    return episodes
