"""The reward of one search-agent episode, split into parts so training can log each.

``total = outcome + format + evidence``, or with the citation-aware rubric on
(below) ``total = (1 - a) * outcome + a * outcome * rubric + format + evidence``, where

* ``outcome`` is the exact match or F1 (:mod:`searchlab.scoring`, the same
  definitions evaluation uses) of the *parsed* final answer against the golds;
* ``format`` is ``-format_penalty`` when the episode broke the protocol (no or an
  empty answer, an invalid action the environment had to correct, or cut off at
  ``max_turns``), else 0; it is charged once, however many problems there are.
  With ``format_credit: graded`` it is Search-R1's format reward instead
  (``qa_em_format``), for a policy that does not yet follow the protocol:
  +0.2 for a well-formed wrong episode, −0.2 for a right but ill-formed one,
  +0.1 for an ill-formed one that still answered, 0 otherwise, times
  ``format_weight`` (so with weight 1 the totals are 1.0 / 0.8 / 0.2 / 0.1 /
  0); plus ``search_bonus`` when the episode ran a search (R1-Searcher's stage
  1) for more than the prompt's own words (a copied placeholder such as
  "query" earns none). Both fade to 0 over ``fade_steps`` (:func:`fade`), leaving the outcome;
* ``evidence`` is ``evidence_bonus`` when the episode's searches retrieved every
  gold passage (evaluation's notion, :func:`searchlab.agent.samples.found_evidence`),
  else 0 (a bonus of 0 turns it off), plus ``evidence_share`` times the share of
  the gold passages retrieved (David-GRPO's graded search credit, paid whatever
  the answer; 0 turns it off);
* ``rubric`` is the share of the question's evidence-chain rubrics the episode
  satisfied: each hidden entity named in its own text and backed by a
  ``<cite>`` of the passage stating it (:mod:`searchlab.rl.rubric`, CaRR).

The rubric is on when ``a = rubric_weight > 0`` and the question's ``chain``
(its constraints) gives rubrics; otherwise ``rubric`` is 0 and the total is
the plain sum, exactly as without it. The mix is C-GRPO's ("Chaining the
Evidence", Zhang et al. 2026): the rubric reward is added, with weight ``a``,
only to episodes whose answer is right, so it ranks right answers by how well
their evidence chain is shown and cited, and never makes a wrong answer pay
(a well-cited wrong answer must not beat a right one). With the paper's binary
outcome that is ``(1 - a) + a * rubric`` for a right answer and 0 for a wrong
one; scaling the rubric by ``outcome`` is the same for exact match and keeps an
F1 outcome's partial credit partial. The paper's released configuration uses
``a = 0.3``. (Its option of dividing the rubric by the group's best, which
needs the whole group, is left out: GRPO normalises advantages per group anyway.)

Known reward hacks earn nothing: an answer listing several candidates ("Paris or
London", "A, B, C") or longer than ``max_answer_words`` words gets no outcome and
no evidence bonus, and ``hack`` says why. Only the answer the protocol parser
extracted is ever scored, never the completion text, so the passages in
``<information>`` blocks (which usually contain the gold) cannot earn reward.

>>> r = reward("<think>t</think>\\n<answer> Paris </answer>", ["Paris"], params=RewardParams())
>>> (r.total, r.outcome, r.format, r.evidence, r.rubric, r.hack)
(1.0, 1.0, 0.0, 0.0, 0.0, None)
>>> reward("<answer> Paris or London </answer>", ["Paris"], params=RewardParams()).hack
'several candidate answers (or)'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import copies_the_prompt, parse_trajectory
from searchlab.rl.config import RewardParams
from searchlab.rl.rubric import rubric_score
from searchlab.scoring import cover_exact_match, exact_match, f1

__all__ = ["RewardBreakdown", "RewardParams", "c_grpo_outcome", "candidate_separators", "fade", "format_credit",
           "reward"]


@dataclass(frozen=True)
class RewardBreakdown:
    """One episode's reward and its parts: ``total == outcome + format + evidence``, or with the rubric on
    (see the module docstring) ``total == c_grpo_outcome(outcome, rubric, rubric_weight) + format + evidence``.

    ``outcome`` is the answer's own score, unweighted, so it stays the episode's
    accuracy. ``rubric`` is the share of rubrics satisfied, 0 when the rubric is
    off. ``hack`` names the hack the answer was caught at (then ``outcome``,
    ``evidence`` and ``rubric`` are 0), or is ``None``. ``format_problems``
    lists why ``format`` is negative (empty when it is 0). ``evidence_share``
    is the share of the gold passages the episode's searches retrieved, whatever it
    earned (None: a completion string, or a question of unknown evidence).
    """

    total: float
    outcome: float
    format: float
    evidence: float
    hack: str | None = None
    format_problems: tuple[str, ...] = ()
    rubric: float = 0.0
    evidence_share: float | None = None


# Ways an answer lists several candidates. A comma between digits ("1,000") is a
# thousands separator, not a list.
_SEPARATORS: dict[str, re.Pattern[str]] = {
    "or": re.compile(r"\bor\b", re.I),
    ",": re.compile(r"(?<!\d),|,(?!\d)"),
    ";": re.compile(r";"),
    "/": re.compile(r"/"),
    "|": re.compile(r"\|"),
    "newline": re.compile(r"\n"),
}


def candidate_separators(text: str) -> set[str]:
    """The names of the candidate-list separators (see ``_SEPARATORS``) that split ``text`` into several non-empty parts.

    >>> sorted(candidate_separators("Paris or London"))
    ['or']
    >>> candidate_separators("1,000 people")
    set()
    """
    found = set()
    for name, pattern in _SEPARATORS.items():
        parts = [p for p in pattern.split(text) if p.strip(" \t.-")]
        if len(parts) >= 2:
            found.add(name)
    return found


def _hack(answer: str, golds: Sequence[str], params: RewardParams) -> str | None:
    """Why ``answer`` is a reward hack, or ``None``.

    A separator that some gold answer uses itself ("Paris, France", "AC/DC") is
    allowed: the gold is not a list of candidates, so neither is its copy. The
    word limit likewise grows to the longest gold, so a correct answer is never a hack.
    """
    allowed = set().union(*(candidate_separators(g) for g in golds))
    listed = sorted(candidate_separators(answer) - allowed)
    if listed:
        return f"several candidate answers ({', '.join(listed)})"
    limit = max(params.max_answer_words, *(len(g.split()) for g in golds))
    words = len(answer.split())
    if words > limit:
        return f"answer too long ({words} words > {limit})"
    return None


def reward(
    episode: Rollout | str,
    answers: str | Sequence[str],
    evidence_ids: Sequence[str] | None = None,
    params: RewardParams | None = None,
    *,
    chain: Sequence[Mapping[str, Any]] | None = None,
    scale: float = 1.0,
) -> RewardBreakdown:
    """The reward of one episode against its gold ``answers``, with its parts.

    ``episode`` is what :func:`searchlab.agent.rollout.rollout` returns (a
    :class:`Rollout`: its parsed ``answer``, ``finished``, ``invalid_actions``
    and ``retrieved`` ids are used), or a plain completion string, read with
    :func:`~searchlab.agent.protocol.parse_trajectory` (its last answer; the
    environment's invalid-action messages count as invalid actions; a string
    cannot tell a cut-off from a missing answer, both are penalised the same).
    A string carries no retrieved ids, so an evidence bonus with a string is a
    ``ValueError`` rather than a silent 0. ``evidence_ids``: the gold passage
    ids; ``None`` or empty means no bonus is possible. ``chain``: the question's
    ``constraints`` (dicts as in ``train.jsonl``), read only when
    ``params.rubric_weight > 0``; ``None`` or empty means no rubric. A rubric
    needs the retrieved ids as much as the bonus does: with a string it is a
    ``ValueError`` too. ``scale`` multiplies the graded format credit and the search bonus (:func:`fade` of the
    step).
    """
    params = params or RewardParams()
    golds = [answers] if isinstance(answers, str) else list(answers)
    if not golds:
        raise ValueError("answers is empty: at least one gold answer is needed")
    wants_evidence = (params.evidence_bonus > 0 or params.evidence_share > 0) and bool(evidence_ids)
    wants_rubric = params.rubric_weight > 0 and bool(chain)

    answer, problems, searched = _read_episode(episode, wants_evidence, wants_rubric)
    answered = bool(answer and answer.strip())
    hack = _hack(answer, golds, params) if answered else None
    format_part = format_credit(params, not problems, answered, answered and hack is None
                                and exact_match(answer, golds) > 0, searched, scale)
    share = evidence_share(episode, evidence_ids) if isinstance(episode, Rollout) else None
    if hack is not None:
        # Nothing positive for a hack, but it keeps a format penalty: otherwise a
        # malformed episode would do better by listing candidates than by answering once.
        format_part = min(format_part, 0.0)
        return RewardBreakdown(format_part, 0.0, format_part, 0.0, hack, tuple(problems), evidence_share=share)

    outcome = OUTCOMES[params.metric](answer, golds) if answered else 0.0
    evidence = 0.0
    if wants_evidence and share is not None:
        evidence = params.evidence_bonus * (share == 1.0) + params.evidence_share * share
    rubric = rubric_score(episode, chain, golds) if wants_rubric else None
    if rubric is None:  # off, or a chain without rubrics: the plain sum, exactly as without the rubric
        return RewardBreakdown(outcome + format_part + evidence, outcome, format_part, evidence, None,
                               tuple(problems), evidence_share=share)
    mixed = c_grpo_outcome(outcome, rubric, params.rubric_weight)
    return RewardBreakdown(mixed + format_part + evidence, outcome, format_part, evidence, None, tuple(problems),
                           rubric, share)


def _read_episode(episode: Rollout | str, wants_evidence: bool,
                  wants_rubric: bool) -> tuple[str | None, list[str], bool]:
    """``(answer, problems, searched)`` of an episode or a completion string (see :func:`reward`): its answer, how it
    broke the protocol, and whether it searched for more than the prompt's own words."""
    problems: list[str] = []
    if isinstance(episode, Rollout):
        answer = episode.answer
        if not episode.finished:
            problems.append("cut off at max_turns")
        invalid = episode.invalid_actions
        searched = _searched_the_question(episode.searches[:len(episode.retrieved)])  # the searches that ran
    elif isinstance(episode, str):
        if wants_evidence:
            raise ValueError("an evidence bonus needs the retrieved passage ids: pass the Rollout, not its text")
        if wants_rubric:
            raise ValueError("a rubric reward needs the retrieved passage ids: pass the Rollout, not its text")
        trajectory = parse_trajectory(episode)
        answer = trajectory.answer
        invalid = sum(s.kind == "feedback" for s in trajectory.segments)
        searched = _searched_the_question(trajectory.searches)
    else:
        raise TypeError(f"episode must be a Rollout or a completion str, got {type(episode).__name__}")
    if answer is None or not answer.strip():
        problems.append("no answer" if answer is None else "empty answer")
    if invalid:
        problems.append(f"{invalid} invalid action(s)")
    return answer, problems, searched


def _searched_the_question(queries: Sequence[str]) -> bool:
    """Whether a search earns ``search_bonus``: one of ``queries`` holds a word beyond the prompt's own. Measured on
    SmolLM2 from base: the bonus otherwise pays for the placeholder "query" copied from the instruction, and that
    was all the spread its groups had (docs/results/own-data.md)."""
    return any(not copies_the_prompt(query) for query in queries)


def format_credit(params: RewardParams, well_formed: bool, answered: bool, right: bool, searched: bool,
                  scale: float = 1.0) -> float:
    """An episode's ``format`` part under ``params`` (see the module docstring); ``scale`` fades the graded credit
    and the search bonus.

    >>> graded = RewardParams(format_credit="graded")
    >>> [format_credit(graded, *case, searched=False) for case in
    ...  [(True, True, True), (False, True, True), (True, True, False), (False, True, False), (False, False, False)]]
    [0.0, -0.2, 0.2, 0.1, 0.0]
    >>> round(format_credit(RewardParams(search_bonus=0.5), False, False, False, searched=True, scale=0.5), 3)
    0.15
    """
    bonus = params.search_bonus * scale if searched else 0.0
    if params.format_credit == "penalty":
        return bonus + (0.0 if well_formed else -params.format_penalty)
    if well_formed:
        credit = 0.0 if right else 0.2
    else:
        credit = -0.2 if right else (0.1 if answered else 0.0)
    return bonus + params.format_weight * scale * credit


def fade(params: RewardParams, step: int) -> float:
    """The share of the graded format credit and the search bonus left at ``step``: 1 without ``fade_steps``, else
    falling linearly to 0 at step ``fade_steps``.

    >>> fade(RewardParams(fade_steps=10), 0), fade(RewardParams(fade_steps=10), 5), fade(RewardParams(), 99)
    (1.0, 0.5, 1.0)
    """
    return 1.0 if params.fade_steps is None else max(0.0, 1.0 - step / params.fade_steps)


OUTCOMES = {"em": exact_match, "f1": f1, "cover_em": cover_exact_match}  # rl.reward.metric -> the answer's score


def evidence_share(episode: Rollout, evidence_ids: Sequence[str] | None) -> float | None:
    """The share of ``evidence_ids`` that ``episode``'s searches retrieved; None when the evidence is unknown.

    >>> evidence_share(Rollout("q", "p", retrieved=[["a", "x"], ["y"]]), ["a", "b"])
    0.5
    """
    return retrieved_share(episode.retrieved, evidence_ids)


def retrieved_share(retrieved: Sequence[Sequence[str]], evidence_ids: Sequence[str] | None) -> float | None:
    """The share of ``evidence_ids`` among the passage ids of ``retrieved`` (one list per search); None when the
    evidence is unknown."""
    if not evidence_ids:
        return None
    seen = {doc for ids in retrieved for doc in ids}
    return sum(doc in seen for doc in set(evidence_ids)) / len(set(evidence_ids))


def c_grpo_outcome(outcome: float, rubric: float, weight: float) -> float:
    """C-GRPO's mix of an outcome score and a rubric share: the rubric counts only as far as the answer is right.

    >>> c_grpo_outcome(1.0, 0.5, 0.5), c_grpo_outcome(0.0, 1.0, 0.5)
    (0.75, 0.0)
    """
    return (1 - weight) * outcome + weight * outcome * rubric
