"""How a turn ends and what the environment answers: the rules every rollout engine plays by.

:func:`searchlab.agent.rollout.rollout` builds one :class:`TurnRules` per call and hands it to the engine that
plays the episodes (its chunked ``generate`` loop, or :func:`searchlab.agent.continuous.play`), so both cut a turn
at the same stop string, record the same action, append the same information block and end an episode at the
same point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import ANSWER_CLOSE, QUESTION_CLOSE, SEARCH_CLOSE, Action, parse_action, step
from searchlab.agent.text import decode, encode_completion

if TYPE_CHECKING:
    from searchlab.agent.extractive import ExtractiveAnswers
    from searchlab.params import RolloutParams
    from searchlab.retrieval.base import RecordingRetriever

STOP_STRINGS: tuple[str, ...] = (SEARCH_CLOSE, ANSWER_CLOSE, QUESTION_CLOSE)


def has_room(length: int, params: RolloutParams, limit: int | None) -> bool:
    """Whether a context of ``length`` tokens leaves room for one more turn within ``limit`` positions
    (:func:`searchlab.agent.rollout.context_limit`; None: no limit)."""
    return limit is None or length + params.max_new_tokens < limit


def stop_token_ids(tokenizer: Any) -> list[int] | None:
    """The ids of the stop tags where each is one token (comparing the last id is then enough, and cheap); None
    where a tag spans tokens (Qwen's vocabulary): the tags must be matched as strings."""
    single = [encode_completion(tokenizer, s) for s in STOP_STRINGS]
    return [ids[0] for ids in single] if all(len(ids) == 1 for ids in single) else None


def turn_ends(tokenizer: Any, eos_ids: list[int]):
    """Whether a turn's ids so far end it: the last one is EOS or completes ``</search>``, ``</answer>`` or
    ``</question>`` (one id where the tags are tokens; else the text of the last few, as ``StopStringCriteria``)."""
    stop_ids = stop_token_ids(tokenizer)
    if stop_ids is not None:
        stops = {*stop_ids, *eos_ids}
        return lambda ids: ids[-1] in stops
    window = max(map(len, STOP_STRINGS))  # a tag spans at most as many tokens as it has characters
    eos = set(eos_ids)

    def ends(ids: list[int]) -> bool:
        if ids[-1] in eos:
            return True
        text, before = decode(tokenizer, ids[-window:]), decode(tokenizer, ids[-window:-1])
        return any(s in text and s not in before for s in STOP_STRINGS)

    return ends


def cut_turn(tokenizer: Any, ids: list[int], eos_ids: list[int], answer_opened: bool = False, opened: str = ""):
    """(kept ids, their text, the action): the turn up to its first stop string, at a token boundary.

    ``answer_opened``: the turn continues an ``<answer>`` its prompt opened (see ``force_answer``). ``opened``:
    the tag the environment prefilled before the turn (``rollout.prefill``), read as the turn's start.
    """
    text = decode(tokenizer, ids)
    ends = [text.find(s) + len(s) for s in STOP_STRINGS if s in text]
    if ends:
        # Normally the stop is the last token already. A tag the criterion did not see (spelled in
        # pieces where it is a special token) is cut here, where generation should have stopped:
        # the shortest prefix of ids whose text reaches the end of the first stop string.
        cut, keep = min(ends), len(ids)
        while keep > 1 and len(decode(tokenizer, ids[:keep - 1])) >= cut:
            keep -= 1
        ids = ids[:keep]
        text = decode(tokenizer, ids)
    body = decode(tokenizer, ids[:-1]) if ids and ids[-1] in eos_ids else text
    return ids, text, parse_action(opened + body, answer_opened)


@dataclass
class TurnRules:
    """The rules of one :func:`~searchlab.agent.rollout.rollout` call's turns: ``params`` (turn length, turns,
    passages, information budget), the model's ``eos_ids``, ``pad_id`` and ``limit`` (its positions; None: no
    limit), the ``extractive`` answer constraint (None: free answers) and ``force_answer`` (the first turn
    continues an ``<answer>`` the prompt opened)."""

    tokenizer: Any
    params: RolloutParams
    eos_ids: list[int]
    pad_id: int
    limit: int | None = None
    extractive: ExtractiveAnswers | None = None
    force_answer: bool = False

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the environment appends it (the information budget counts these)."""
        return len(encode_completion(self.tokenizer, text))

    def finish(self, r: Rollout, generated: list[int], answer_opened: bool,
               reported: list[float] | None = None) -> tuple[list[int], Action]:
        """Record a model turn into ``r``: the turn cut at its first stop string (:func:`cut_turn`) and what it
        did. Returns ``(kept ids, action)``. ``reported``: the engine's log-probabilities of the generated
        tokens."""
        # the first turn continues the prefilled tag, which is all the completion holds before it
        opened = r.completion if r.turns == 0 else ""
        ids, text, action = cut_turn(self.tokenizer, generated, self.eos_ids, answer_opened, opened)
        r.completion += text
        r.completion_ids += ids
        r.env_mask += [0] * len(ids)
        r.generated_tokens += len(ids)
        r.turns += 1
        if r.logprobs is not None:  # the kept tokens' (a cut turn keeps a prefix); None once a turn had none
            r.logprobs = None if reported is None else r.logprobs + reported[:len(ids)]
        if action.kind == "search":
            r.searches.append(action.content)
        elif action.kind == "invalid":
            r.invalid_actions += 1
        return ids, action

    def search(self, recorder: RecordingRetriever, actions: list[Action]) -> list[str | None]:
        """What the environment appends after each of ``actions`` (:func:`searchlab.agent.protocol.step`), their
        searches run together through ``recorder``."""
        return step(recorder, actions, self.params.topk, self.params.max_information_tokens, self.count_tokens)

    def after_step(self, r: Rollout, action: Action, text: str | None, recorder: RecordingRetriever, last: bool,
                   began: float) -> list[int] | None:
        """Record the environment's answer to ``r``'s last action (``text``: what it appends; None: the episode
        is over). Returns the ids to append, or None when the episode leaves the batch: it answered, was cut off
        in its last turn, or the text and one more turn would not fit ``limit`` positions (its search ran; the
        block is not shown)."""
        if action.kind == "answer":
            r.answer, r.finished = action.content, True
        elif action.kind == "question":
            r.proposed, r.finished = action.content, True
        elif action.kind == "search" and not last:
            r.retrieved.append(recorder.ids[action.content])
        ids = None if text is None else encode_completion(self.tokenizer, text)
        if ids is None or not has_room(len(r.prompt_ids) + len(r.completion_ids) + len(ids), self.params,
                                       self.limit):
            r.seconds = time.perf_counter() - began
            return None
        r.completion += text
        r.completion_ids += ids
        r.env_mask += [1] * len(ids)
        return ids
