"""Sample trajectories: how a trained agent uses the protocol on held-out questions, as rates and a readable record.

After training, a few held-out questions (each with the passages its answer
needs, ``evidence``) are rolled out. :func:`protocol_rates` says how often the
agent searched well-formedly, found the needed passages and answered;
:func:`trajectory_record` and :func:`render_markdown` keep the trajectories for
people to read, and :func:`write_samples` does all of it for one model. Answer
accuracy is the evaluation stage's business; EM here is a first look only.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import copies_the_prompt, parse_trajectory
from searchlab.agent.rollout import rollout
from searchlab.jsonl import write_jsonl
from searchlab.questions.record import QuestionRecord, present
from searchlab.scoring import exact_match


def spread_sample(questions: Sequence[QuestionRecord], n: int, seed: int) -> list[QuestionRecord]:
    """Up to ``n`` of ``questions``, taken in turn from each ``type`` (shuffled with ``seed``), so every type shows."""
    by_type: dict[str, list[QuestionRecord]] = defaultdict(list)
    for q in questions:
        by_type[present(q.type) or ""].append(q)
    rng = random.Random(seed)
    pools = [rng.sample(group, len(group)) for _, group in sorted(by_type.items())]
    picked: list[QuestionRecord] = []
    while len(picked) < n and any(pools):
        for pool in pools:
            if pool and len(picked) < n:
                picked.append(pool.pop())
    return picked


def found_evidence(episode: Rollout, evidence: Sequence[str] | None) -> bool | None:
    """Whether the agent's searches together returned every passage in ``evidence``; None when the question's
    evidence is unknown (questions read from files)."""
    if evidence is None:
        return None
    seen = {doc for ids in episode.retrieved for doc in ids}
    return set(evidence) <= seen


def protocol_shares(episodes: Sequence[Rollout]) -> dict[str, float]:
    """How ``episodes`` used the protocol, whatever their questions: shares that searched, were well-formed end to
    end and answered, the mean searches per episode, invalid actions per turn, and the share of searches whose
    query is one word of the prompt's own text (:func:`~searchlab.agent.protocol.copies_the_prompt`).

    ``well_formed``: the whole trajectory parses without a single problem
    (:meth:`~searchlab.agent.protocol.Trajectory.problems`) and has at least one search.
    """
    n = len(episodes)
    turns = sum(e.turns for e in episodes)
    queries = [query for e in episodes for query in e.searches]

    def share(flags) -> float:
        return round(sum(flags) / n, 4) if n else 0.0

    return {
        "searched": share(bool(e.searches) for e in episodes),
        "well_formed": share(bool(e.searches) and not parse_trajectory(e.completion).problems() for e in episodes),
        "answered": share(e.answer is not None for e in episodes),
        "mean_searches": round(len(queries) / n, 3) if n else 0.0,
        "invalid_action_rate": round(sum(e.invalid_actions for e in episodes) / turns, 4) if turns else 0.0,
        "prompt_copied_queries": round(sum(map(copies_the_prompt, queries)) / len(queries), 4) if queries else 0.0,
    }


def protocol_rates(episodes: Sequence[Rollout], questions: Sequence[QuestionRecord]) -> dict[str, float]:
    """:func:`protocol_shares`, the share that found the evidence and the share that got EM.

    ``found_evidence``: the searches returned every evidence passage
    (the question's ``evidence``), among the questions whose evidence is known (left out when none's is).
    """
    n = len(episodes)
    if n == 0 or n != len(questions):
        raise ValueError(f"got {n} episodes for {len(questions)} questions")
    found = [found_evidence(e, present(q.evidence)) for e, q in zip(episodes, questions)]
    known = [flag for flag in found if flag is not None]
    return {
        **protocol_shares(episodes),
        **({"found_evidence": round(sum(known) / len(known), 4)} if known else {}),
        "exact_match": round(sum(exact_match(e.answer or "", q.answers)
                                 for e, q in zip(episodes, questions)) / n, 4),
    }


def trajectory_record(episode: Rollout, question: QuestionRecord) -> dict:
    """One JSON-ready line: the question, gold answers, what the agent did and whether it worked."""
    evidence = present(question.evidence)
    return {
        "id": question.id, "type": present(question.type), "question": episode.question,
        "answers": question.answers, "prediction": episode.answer,
        "exact_match": exact_match(episode.answer or "", question.answers),
        "found_evidence": found_evidence(episode, evidence), "evidence": evidence,
        "searches": episode.searches, "retrieved": episode.retrieved, "turns": episode.turns,
        "generated_tokens": episode.generated_tokens, "problems": parse_trajectory(episode.completion).problems(),
        "completion": episode.completion,
    }


def render_markdown(records: Sequence[dict], title: str) -> str:
    """The records as a Markdown page: per question the verdict line, then the trajectory verbatim."""
    lines = [f"# {title}", ""]
    for r in records:
        verdict = "correct" if r["exact_match"] else "wrong"
        lines += [f"## {r['id']} ({r['type']}): {verdict}", "",
                  f"**Question:** {r['question']}  ", f"**Gold:** {' | '.join(r['answers'])}  ",
                  f"**Prediction:** {r['prediction']}  ",
                  f"**Searches:** {len(r['searches'])}, evidence found: "
                  f"{ {True: 'yes', False: 'no', None: 'unknown'}[r['found_evidence']] }", ""]
        if r["problems"]:
            lines += [f"**Protocol problems:** {'; '.join(r['problems'])}", ""]
        lines += ["```text", r["completion"].replace("```", "'''"), "```", ""]
    return "\n".join(lines)


def write_samples(model: Any, tokenizer: Any, retriever: Any, questions: Sequence[QuestionRecord], params,
                  out_dir: Path, title: str) -> dict[str, float]:
    """Roll the agent out on ``questions``; write ``samples.jsonl`` and ``samples.md`` to ``out_dir``; the rates.

    ``params`` are the :class:`~searchlab.params.RolloutParams`; the result is
    :func:`protocol_rates` of the episodes.
    """
    episodes = rollout(model, tokenizer, retriever, [q.question for q in questions], params)
    records = [trajectory_record(e, q) for e, q in zip(episodes, questions)]
    write_jsonl(out_dir / "samples.jsonl", records)
    (out_dir / "samples.md").write_text(render_markdown(records, title))
    return protocol_rates(episodes, questions)
