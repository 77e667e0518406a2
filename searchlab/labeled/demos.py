"""Demonstrations from labeled questions: what SFT learns from when the questions come from files, not a KB.

A question file gives a question and its gold answers, never the trajectory
that finds them. Search-R1's SFT baseline makes one by rejection: search, and
keep the trajectory only when what it retrieved leads to the gold answer.
:func:`labeled_demonstrations` does that with the index the agent will search:
each question is searched as it is written (the query a zero-shot agent would
try first), and the episode is kept when a retrieved passage contains a gold
answer once both are normalised as evaluation normalises them (SQuAD's
normalisation); it then answers with that answer *as the passage writes it*
(:func:`answer_as_written`), so SFT teaches the agent to copy from what it
read. The completion is rendered by the agent protocol
(:func:`searchlab.agent.protocol.render_demonstration`), the same code synthesis
uses, so it looks exactly like a synthesized demonstration.

Where the file names the question's supporting passages by title (HotpotQA's
supporting facts: ``metadata.supporting_titles``) and the question's own search
finds no gold answer, the demonstration searches those titles next, one search
each, in order, those whose passages no earlier search showed first (:func:`next_query`),
until a passage holds a gold answer or ``max_searches`` are spent: the multi-hop
trajectory such a question needs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from searchlab.agent.protocol import DemoStep, instruction, render_demonstration
from searchlab.corpus.importers import split_contents
from searchlab.questions.record import QuestionRecord, present
from searchlab.retrieval.base import Retriever
from searchlab.scoring import cover_exact_match, normalize_answer

SEARCH_THINK = "I need to look this up."
FOLLOW_UP_THINK = "That is not enough yet. I need to search for {title}."
BATCH = 256  # questions a retriever call searches at once
_EDGES = ",;:!?\"'()[]“”‘’."  # punctuation a passage attaches to the words of an answer


def answer_as_written(text: str, answers: Sequence[str]) -> str | None:
    """The first span of ``text`` (whole words) that normalises to a gold answer of ``answers``, the punctuation at
    its edges stripped, as ``text`` writes it; None when ``text`` holds none.

    >>> answer_as_written('"Tokyo"\\nTokyo is the capital of Japan.', ["the capital of japan"])
    'capital of Japan'
    >>> answer_as_written("It was founded in 1167, by monks.", ["1167"])
    '1167'
    """
    words = list(re.finditer(r"\S+", text))
    for answer in answers:
        target = normalize_answer(answer)
        if not target:
            continue
        size = len(target.split())
        # a normalised answer drops articles, so the written span may hold one word more
        for width in (size, size + 1):
            for i in range(len(words) - width + 1):
                span = text[words[i].start():words[i + width - 1].end()].strip(_EDGES)
                if normalize_answer(span) == target:
                    return span
    return None


def demonstration(steps: Sequence[DemoStep], answers: Sequence[str]) -> str | None:
    """The completion of searches ``steps`` (their hits retrieved), answering from the first passage of the last
    search that holds a gold answer, as the passage writes it; None when that search found none."""
    for rank, hit in enumerate(steps[-1].hits, start=1):
        written = answer_as_written(hit.contents, answers)
        if written is not None:
            return render_demonstration(steps, f"Doc {rank} gives the answer.", written)
    return None


def supporting_titles(record: QuestionRecord) -> list[str]:
    """The titles a question file names as the question's supporting passages (see the module docstring)."""
    metadata = present(record.metadata) or {}
    titles = metadata.get("supporting_titles") if isinstance(metadata, dict) else None
    # a title with markup could not be written inside the protocol's tags: it is not searched
    return [t for t in titles if isinstance(t, str) and t.strip() and "<" not in t] if isinstance(titles, list) else []


def next_query(question: str, titles: Sequence[str], steps: Sequence[DemoStep]) -> str | None:
    """What a demonstration searches after ``steps``: first the question as written, then the first supporting
    title not yet searched whose passages none of the searches showed, then one whose passages were shown (an
    entity's title heads several passages, and the one that was shown may not be the one needed); None when every
    title was searched."""
    if not steps:
        return question
    searched = {step.query for step in steps}
    shown = {split_contents(hit.contents)[0] for step in steps for hit in step.hits}
    left = [title for title in titles if title not in searched]
    return next((title for title in left if title not in shown), left[0] if left else None)


def labeled_demonstrations(stored: Sequence[tuple[str, QuestionRecord]], retriever: Retriever, topk: int,
                           max_searches: int = 3) -> tuple[list[dict], dict]:
    """The solver demonstrations of ``stored`` (the qa stage's stored questions, each after its split) in
    ``demos.jsonl``'s shape, each of at most ``max_searches`` searches, and counts: questions, demonstrations,
    their share, those that needed a follow-up search, and the questions without one by reason
    (``answer_in_question``: the query would contain the answer, which synthesis refuses too; ``not_retrieved``)."""
    missed = Counter()
    # each question's searches so far; a question is done when its completion is made or it has no search left
    plans: dict[int, list[DemoStep]] = {}
    titles: dict[int, list[str]] = {}
    records = [record for _, record in stored]
    for i, record in enumerate(records):
        if cover_exact_match(record.question, record.answers):
            missed["answer_in_question"] += 1
            continue
        plans[i] = []
        titles[i] = [t for t in supporting_titles(record) if not cover_exact_match(t, record.answers)]
    completions: dict[int, str] = {}
    while True:
        queries = {i: query for i in plans if i not in completions and len(plans[i]) < max_searches
                   and (query := next_query(records[i].question, titles[i], plans[i])) is not None}
        if not queries:
            break
        pending = list(queries)
        for start in range(0, len(pending), BATCH):
            batch = pending[start:start + BATCH]
            for i, hits in zip(batch, retriever.search([queries[i] for i in batch], topk)):
                query = queries[i]
                think = SEARCH_THINK if not plans[i] else FOLLOW_UP_THINK.format(title=query)
                plans[i].append(DemoStep(think=think, query=query, hits=hits))
                completion = demonstration(plans[i], records[i].answers)
                if completion is not None:
                    completions[i] = completion
    missed["not_retrieved"] += sum(i not in completions for i in plans)
    demos = [{"id": r.id, "split": split, "type": r.type, "question": r.question, "answers": r.answers,
              "role": "solver", "prompt": instruction(r.question), "completion": completions[i]}
             for i, (split, r) in enumerate(stored) if i in completions]
    counts = {"questions": len(records), "demos": len(demos),
              "demo_share": round(len(demos) / len(records), 4) if records else 0.0,
              "demos_with_follow_up": sum(len(plans[i]) > 1 for i in completions),
              **{f"no_demo.{why}": n for why, n in sorted(missed.items()) if n}}
    return demos, counts
