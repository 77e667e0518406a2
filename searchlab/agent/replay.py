"""A written trajectory played through the live environment: the episode the agent would have had.

RL's expert guidance (:mod:`searchlab.rl.env`) puts a question's
demonstration into a GRPO group beside the policy's own episodes, so it must be
the same kind of object as a sampled one: a :class:`~searchlab.agent.episode.Rollout`
with the prompt the rollout would have given, the model turns tokenized as
continuation text (as SFT encodes them, :func:`~searchlab.agent.text.encode_completion`),
and every environment insertion made *now*, by the retriever and settings the
rollouts use, so its information blocks, retrieved passage ids and masks are
exactly those a live episode writing the same turns would get.

>>> model_turns("<search> a </search>\\n\\n<information>Doc 1(Title: A) x</information>\\n\\n<answer> b </answer>")
['<search> a </search>', '<answer> b </answer>']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import INVALID_ACTION_FEEDBACK, environment_spans, information_block, parse_action
from searchlab.agent.text import agent_prompt, encode_completion, encode_prompt

if TYPE_CHECKING:
    from searchlab.params import RolloutParams
    from searchlab.retrieval.base import Retriever


def model_turns(completion: str) -> list[str]:
    """The model's own turns of a written completion: the text between the environment's insertions."""
    turns, position = [], 0
    for start, end in [*environment_spans(completion), (len(completion), len(completion))]:
        if completion[position:start].strip():
            turns.append(completion[position:start])
        position = end
    return turns


def replay(tokenizer: Any, retriever: Retriever, question: str, turns: Sequence[str], params: RolloutParams) -> Rollout:
    """The :class:`Rollout` of an agent that wrote ``turns`` (its model turns, in order) on ``question``.

    As in :func:`~searchlab.agent.rollout.rollout`: at most ``params.max_turns``
    turns (a search in the last one is listed but not run, and the episode is
    cut off), ``params.topk`` passages a search in an information block of at
    most ``params.max_information_tokens`` tokens, the invalid-action message
    after a turn that neither searches nor answers. Turns after the answer are
    ignored.
    """
    prompt = agent_prompt(tokenizer, question)
    episode = Rollout(question, prompt, prompt_ids=encode_prompt(tokenizer, prompt))

    def count_tokens(text: str) -> int:
        return len(encode_completion(tokenizer, text))

    for turn, text in enumerate(turns[:params.max_turns]):
        ids = encode_completion(tokenizer, text)
        episode.completion += text
        episode.completion_ids += ids
        episode.env_mask += [0] * len(ids)
        episode.generated_tokens += len(ids)
        episode.turns += 1
        action = parse_action(text)
        if action.kind in ("answer", "question"):
            episode.finished = True
            episode.answer, episode.proposed = (action.content, None) if action.kind == "answer" else \
                (None, action.content)
            break
        if action.kind == "search":
            episode.searches.append(action.content)
        else:
            episode.invalid_actions += 1
        if turn == params.max_turns - 1:
            break  # cut off: nothing would read this turn's results
        if action.kind == "search":
            hits = retriever.search([action.content], params.topk)[0]
            episode.retrieved.append([hit.id for hit in hits])
            inserted = information_block(hits, params.max_information_tokens, count_tokens)
        else:
            inserted = INVALID_ACTION_FEEDBACK
        ids = encode_completion(tokenizer, inserted)
        episode.completion += inserted
        episode.completion_ids += ids
        episode.env_mask += [1] * len(ids)
    return episode


def demonstration_turns(demos_jsonl) -> dict[str, list[str]]:
    """``{question id: its demonstration's model turns}`` of the solver demonstrations in ``demos_jsonl`` (the qa
    stage's: one per synthesized training or dev question; self-play proposer demonstrations are left out)."""
    from searchlab.jsonl import iter_jsonl

    return {d["id"]: model_turns(d["completion"]) for _, d in iter_jsonl(demos_jsonl) if d.get("role") == "solver"}


def prefix_through_search(tokenizer: Any, episode: Rollout, searches: int) -> tuple[str, int, int]:
    """``(text, tokens, turns)`` of ``episode``'s completion up to the end of the information block of its
    ``searches``-th search that ran: the point an episode continued from there (:func:`continued`) starts at."""
    from searchlab.agent.protocol import INFORMATION_OPEN

    blocks, turns, position = 0, 0, 0
    mask = episode.env_mask
    while position < len(mask):
        end = position
        while end < len(mask) and mask[end] == mask[position]:
            end += 1
        if mask[position] == 0:
            turns += 1
        elif INFORMATION_OPEN in tokenizer.decode(episode.completion_ids[position:end], skip_special_tokens=False):
            blocks += 1
            if blocks == searches:
                ids = episode.completion_ids[:end]
                return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False), end, turns
        position = end
    raise ValueError(f"the episode has {blocks} information blocks, not {searches}")


def continued(episode: Rollout, tokens: int, turns: int, searches: int, rest: Rollout) -> Rollout:
    """``episode``'s first ``tokens`` completion tokens (``turns`` model turns, ``searches`` searches that ran:
    :func:`prefix_through_search`) followed by ``rest``, the rollout of its prompt plus that prefix; one episode
    of the original prompt, as if the model had played it in one go."""
    invalid = sum(1 for i in range(1, tokens) if episode.env_mask[i] and not episode.env_mask[i - 1]) - searches
    prefix_mask = episode.env_mask[:tokens]
    return Rollout(
        episode.question, episode.prompt, completion=episode.completion[:len(rest.prompt) - len(episode.prompt)]
        + rest.completion, prompt_ids=episode.prompt_ids, completion_ids=episode.completion_ids[:tokens]
        + rest.completion_ids, env_mask=prefix_mask + rest.env_mask, answer=rest.answer, proposed=rest.proposed,
        searches=episode.searches[:searches] + rest.searches, retrieved=episode.retrieved[:searches] + rest.retrieved,
        turns=turns + rest.turns, generated_tokens=prefix_mask.count(0) + rest.generated_tokens,
        invalid_actions=invalid + rest.invalid_actions, finished=rest.finished)
