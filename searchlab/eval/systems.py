"""The systems evaluation compares, all played by one model through the agent's batched rollouts.

* ``direct``: closed book. The agent's prompt, then one turn in which the model
  must answer from what it knows.
* ``rag``: one-shot retrieval. The question itself is searched, and the prompt
  shows that search and its ``params.topk`` passages exactly as the environment
  would have appended them; then one turn in which the model must answer. The
  model sees the protocol it was trained on, so a difference to ``agent`` comes
  from what retrieval found, not from an unfamiliar format.
* ``agent``: the multi-turn search agent (:func:`searchlab.agent.rollout.rollout`).
* ``sampled``: the agent again, its episodes sampled (``params`` with a
  temperature, several per question, :func:`sampled_params`): its EM, the mean
  over a question's episodes, moves with small shifts of the distribution that
  greedy decoding hides.

A one-turn baseline must answer without searching, or it measures nothing: an
agent trained to search first would ask for a search in its only turn, nothing
would run it, and the baseline would score 0 by construction. Nor may it be
made to answer at once: every demonstration taught the model to think first,
and a forced ``<answer>`` before any thinking measures the forced tag, not the
missing search. So ``direct`` and ``rag`` play one free turn (:func:`one_turn`):
the model thinks and answers as it was trained to; where it starts a search
instead, the search is not run: its text up to ``<search>`` (its thinking) is
kept, ``<answer>`` is forced after it, and the model writes the answer's text
(read as the answer whatever it holds). Forcing the tag only where a search
begins (rather than masking ``<search>`` out of decoding) works alike for a
tokenizer where the tag is one token and for one that spells it in pieces, works
on vLLM too, and leaves extractive answers their usual job.

Every system decodes with the same ``RolloutParams`` (temperature, top-p, new
tokens per turn, passages per search, information budget, extractive answers);
only ``max_turns`` is 1 for ``direct`` and ``rag``. :func:`describe` says in one
line how a system was run, for the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from searchlab.agent.protocol import (
    ANSWER_OPEN,
    SEARCH_CLOSE,
    SEARCH_OPEN,
    information_block,
)
from searchlab.agent.episode import Rollout
from searchlab.agent.rollout import rollout
from searchlab.agent.text import agent_prompt, encode_completion
from searchlab.eval.config import EvalSystem
from searchlab.params import RolloutParams
from searchlab.retrieval.base import Hit, Retriever

SYSTEMS: tuple[str, ...] = get_args(EvalSystem)  # the schema's list


def describe(system: str, params: RolloutParams, samples: int = 1) -> str:
    """How ``system`` (one of :data:`SYSTEMS`) is run with ``params`` (and ``samples`` episodes per question), in one
    line for a person reading the report."""
    how = {
        "direct": f"one turn, no search: the model thinks and answers; a search it starts is not run, "
                  f"`{ANSWER_OPEN}` replaces it after its thinking",
        "rag": (f"one turn, no search by the model: the question itself was searched and its top {params.topk} "
                f"passages shown; the model thinks and answers, a search it starts is not run, `{ANSWER_OPEN}` "
                f"replaces it after its thinking"),
        "agent": (f"up to {params.max_turns} turns: searches as often as the model chooses "
                  f"({params.topk} passages each), then its answer"),
        "sampled": (f"the agent, {samples} sampled episodes per question; EM and F1 are their means"),
    }
    if system not in how:
        raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")
    decoding = "greedy" if params.temperature == 0 else f"sampled at temperature {params.temperature}"
    extractive = "; answers copy words of the question or passages shown" if params.extractive_answers else ""
    return f"{how[system]} ({decoding}{extractive})"


def searched_prompt(tokenizer: Any, question: str, searches: Sequence[tuple[str, Sequence[Hit]]],
                    params: RolloutParams) -> str:
    """The agent's prompt for ``question`` followed by ``searches`` as if it had made them: each query in
    ``<search>`` tags and its passages as the environment appends them (``params.max_information_tokens`` each).

    The ``rag`` system shows the question's own search this way; search self-play
    replays the proposer's searches to the solver (:mod:`searchlab.selfplay.verify`).
    """
    def count(text: str) -> int:
        return len(encode_completion(tokenizer, text))

    return agent_prompt(tokenizer, question) + "".join(
        f"{SEARCH_OPEN} {query.strip()} {SEARCH_CLOSE}" + information_block(hits, params.max_information_tokens, count)
        for query, hits in searches)


def rag_prompts(tokenizer: Any, retriever: Retriever, questions: list[str],
                params: RolloutParams) -> tuple[list[str], list[list[str]]]:
    """The ``rag`` prompts (the question searched, its passages shown) and the ids of the passages shown.

    All questions go to ``retriever`` in one call. The forced ``<answer>`` is
    not part of them: :func:`run_system` has the rollout append it.
    """
    results = retriever.search(questions, params.topk)
    prompts = [searched_prompt(tokenizer, question, [(question, hits)], params)
               for question, hits in zip(questions, results)]
    return prompts, [[hit.id for hit in hits] for hits in results]


def one_turn(model: Any, tokenizer: Any, retriever: Retriever, questions: list[str], params: RolloutParams,
             prompts: list[str] | None = None) -> list[Rollout]:
    """One-turn episodes that always end with an answer and never search (see the module doc).

    The model plays one free turn after ``prompts`` (default: the agent's
    prompt); an episode that did not answer in it (it started a search, or
    wrote no action) is played again from its prompt plus the turn's text up
    to ``<search>``, with ``<answer>`` forced; that episode replaces it, its
    generated tokens counting both turns.
    """
    single = params.model_copy(update={"max_turns": 1})  # the last turn's search is never run
    episodes = rollout(model, tokenizer, retriever, questions, single, prompts)
    redo = [i for i, e in enumerate(episodes) if e.answer is None]
    if redo:
        thought = [episodes[i].prompt + episodes[i].completion.split(SEARCH_OPEN)[0] for i in redo]
        forced = rollout(model, tokenizer, retriever, [questions[i] for i in redo], single, thought,
                         force_answer=True)
        for i, episode in zip(redo, forced):
            episode.generated_tokens += episodes[i].generated_tokens
            episodes[i] = episode
    return episodes


def sampled_params(params: RolloutParams, temperature: float, seed: int) -> RolloutParams:
    """The ``sampled`` system's decoding: ``params`` at ``temperature``, top-p 1, its own seed."""
    return params.model_copy(update={"temperature": temperature, "top_p": 1.0, "seed": seed})


def run_system(system: str, model: Any, tokenizer: Any, retriever: Retriever, questions: list[str],
               params: RolloutParams) -> list[Rollout]:
    """One :class:`Rollout` per question of ``system`` (one of :data:`SYSTEMS`), in order.

    ``direct`` and ``rag`` episodes always end with an answer and never search
    (:func:`one_turn`). For ``rag`` the passages shown in the prompt count as
    the episode's first retrieval (``Rollout.retrieved[0]``), so evidence is
    measured alike for every system.
    """
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")
    if system in ("agent", "sampled"):  # sampled: the caller hands sampling params and repeats the questions
        return rollout(model, tokenizer, retriever, questions, params)
    if system == "direct":
        return one_turn(model, tokenizer, retriever, questions, params)
    prompts, shown = rag_prompts(tokenizer, retriever, questions, params)
    episodes = one_turn(model, tokenizer, retriever, questions, params, prompts)
    for episode, ids in zip(episodes, shown):
        episode.retrieved.insert(0, ids)
    return episodes
