"""Whether an episode fits a model's context: the rollout's budgets against the model's positions.

An episode is its prompt, then up to ``rollout.max_turns`` turns of at most ``rollout.max_new_tokens`` tokens,
with an information block of at most ``rollout.max_information_tokens`` tokens after every turn but the last.
Rollouts never read past the model's positions (an episode that would is cut off, see
:func:`searchlab.agent.rollout.rollout`), but an episode the budgets promise and the positions cannot hold is a
mistake of the params or of the input, so it is refused before any work: a profile whose budgets alone overflow
the positions (:func:`budget_problem`), a question whose prompt leaves no room for them (:func:`too_long`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from searchlab.params import RolloutParams


def episode_tokens(params: RolloutParams) -> int | None:
    """The most tokens an episode adds to its prompt; None when information blocks have no budget
    (``rollout.max_information_tokens: null``), so nothing bounds it."""
    if params.max_information_tokens is None:
        return None
    return params.max_turns * params.max_new_tokens + (params.max_turns - 1) * params.max_information_tokens


def budget_words(params: RolloutParams) -> str:
    """How :func:`episode_tokens` is made, with the keys that set it (one turn when nothing bounds it)."""
    if episode_tokens(params) is None:
        return (f"rollout.max_new_tokens ({params.max_new_tokens}) tokens of one turn "
                "(rollout.max_information_tokens is null: no bound on the rest)")
    return (f"rollout.max_turns ({params.max_turns}) x rollout.max_new_tokens ({params.max_new_tokens}) + "
            f"{params.max_turns - 1} x rollout.max_information_tokens ({params.max_information_tokens}) = "
            f"{episode_tokens(params)} tokens")


def budget_problem(params: RolloutParams, positions: int, positions_key: str) -> str | None:
    """What is wrong when the budgets alone, before any prompt, do not fit ``positions`` (set by the params key
    ``positions_key``, or by the model when it is no key); None when they fit or nothing bounds them."""
    needed = episode_tokens(params)
    if needed is None or needed < positions:
        return None
    return (f"an episode may add {budget_words(params)}, and the model reads {positions} positions "
            f"({positions_key}): lower those budgets or raise the positions")


def fits(prompt_tokens: int, params: RolloutParams, positions: int | None) -> bool:
    """Whether a prompt of ``prompt_tokens`` leaves room for a whole episode within ``positions`` (None: no
    limit; an unbounded information budget: room for one turn)."""
    if positions is None:
        return True
    return prompt_tokens + (episode_tokens(params) or params.max_new_tokens) < positions


def too_long(questions: Iterable[Any], tokenizer: Any, params: RolloutParams,
             positions: int | None) -> list[tuple[Any, int]]:
    """``(question, prompt tokens)`` of each question (anything with a ``question`` text) whose agent prompt does
    not :func:`fit` the model."""
    from searchlab.agent.text import agent_prompt, encode_prompt

    if positions is None:
        return []
    found = []
    for question in questions:
        prompt = len(encode_prompt(tokenizer, agent_prompt(tokenizer, question.question)))
        if not fits(prompt, params, positions):
            found.append((question, prompt))
    return found


def length_problem(questions: list[Any], tokenizer: Any, params: RolloutParams, positions: int | None,
                   model: str) -> str | None:
    """What is wrong when some of ``questions`` (benchmark questions, with their ``where``) are too long for
    ``model``: where each was read, its prompt's tokens, the budgets; None when all fit."""
    found = too_long(questions, tokenizer, params, positions)
    if not found:
        return None
    listed = "; ".join(f"{q.where or q.id} ({tokens} tokens)" for q, tokens in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return (f"{len(found)} question(s) too long for model {model}: {listed}{more}. A prompt and its episode "
            f"({budget_words(params)}) must fit the model's {positions} positions: shorten or drop those "
            "questions, or lower the rollout budgets")
