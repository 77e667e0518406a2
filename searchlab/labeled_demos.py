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

The file formats' supporting facts are dropped when questions are read (see
:mod:`searchlab.eval.benchmarks`), so no follow-up search is planned from them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from searchlab.agent.protocol import DemoStep, instruction, render_demonstration
from searchlab.retrieval.base import Hit, Retriever
from searchlab.scoring import normalize_answer

SEARCH_THINK = "I need to look this up."
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


def demonstration(question: str, hits: Sequence[Hit], answers: Sequence[str]) -> tuple[str | None, str]:
    """``(completion, why not)`` of one labeled question searched as written with ``hits`` retrieved: the
    demonstration answering from the first passage that holds a gold answer, or None and the reason
    (``answer_in_question``, ``not_retrieved``)."""
    question_words = f" {normalize_answer(question)} "
    if any(f" {normalize_answer(a)} " in question_words for a in answers if normalize_answer(a)):
        return None, "answer_in_question"  # the query would contain the answer (synthesis refuses such demos too)
    for rank, hit in enumerate(hits, start=1):
        written = answer_as_written(hit.contents, answers)
        if written is not None:
            step = DemoStep(think=SEARCH_THINK, query=question, hits=hits)
            return render_demonstration([step], f"Doc {rank} gives the answer.", written), ""
    return None, "not_retrieved"


def labeled_demonstrations(records: Sequence[dict], retriever: Retriever, topk: int) -> tuple[list[dict], dict]:
    """The solver demonstrations of ``records`` (the qa stage's stored questions with their ``split``) in
    ``demos.jsonl``'s shape, and counts: questions, demonstrations, their share, and the questions without one by
    reason."""
    demos, missed = [], Counter()
    for start in range(0, len(records), BATCH):
        batch = records[start:start + BATCH]
        for record, hits in zip(batch, retriever.search([r["question"] for r in batch], topk)):
            completion, why = demonstration(record["question"], hits, record["answers"])
            if completion is None:
                missed[why] += 1
                continue
            demos.append({"id": record["id"], "split": record["split"], "type": record["type"],
                          "question": record["question"], "answers": record["answers"], "role": "solver",
                          "prompt": instruction(record["question"]), "completion": completion})
    counts = {"questions": len(records), "demos": len(demos),
              "demo_share": round(len(demos) / len(records), 4) if records else 0.0,
              **{f"no_demo.{why}": n for why, n in sorted(missed.items())}}
    return demos, counts
