"""The held-out suites: one FlashRAG JSONL per question type, sampled from the held-out questions.

A suite is named by the corpus its questions come from and the question type:
``world-bridge`` for the synthetic world, ``records-bridge`` for a user's own
records (``corpus.source: records``), so a suite's name never claims the demo
world for questions about someone's own data.
"""

from __future__ import annotations

import random
from pathlib import Path

from searchlab.jsonl import write_jsonl
from searchlab.questions.record import QUESTION_TYPES, QuestionRecord, read_questions
from searchlab.scoring import normalize_answer
from searchlab.synth.config import BenchmarksParams

#: The suites' name prefix for each corpus source that has a knowledge base (the others have no questions).
SUITE_PREFIXES = {"synthetic": "world", "records": "records"}


def suite_prefix(corpus_source: str) -> str:
    """``"synthetic"`` → ``"world"``, ``"records"`` → ``"records"``; ValueError for a source without a KB."""
    try:
        return SUITE_PREFIXES[corpus_source]
    except KeyError:
        raise ValueError(f"corpus.source {corpus_source!r} has no knowledge base, so no held-out suites "
                         f"(expected one of {', '.join(SUITE_PREFIXES)})") from None


def suite_name(question_type: str, corpus_source: str = "synthetic") -> str:
    """``"bridge"`` → ``"world-bridge"`` (``"records-bridge"`` for a records corpus): a suite's benchmark name."""
    return f"{suite_prefix(corpus_source)}-{question_type}"


def suite_names(corpus_source: str = "synthetic") -> tuple[str, ...]:
    """Every suite's name for a corpus source, in question-type order."""
    return tuple(suite_name(t, corpus_source) for t in QUESTION_TYPES)


def write_suites(params: BenchmarksParams, qa_dir: Path, out_dir: Path,
                 corpus_source: str = "synthetic") -> dict[str, int]:
    """Write ``out_dir/<prefix>-<type>.jsonl`` (``{id, question, golden_answers, metadata}``; the prefix from
    :func:`suite_prefix`: ``world`` or ``records``) from ``qa_dir/heldout.jsonl``; return question counts per suite
    and the answer overlap with training (must be 0)."""
    heldout = read_questions(qa_dir / "heldout.jsonl")
    trained = {normalize_answer(a) for name in ("train.jsonl", "dev.jsonl")
               for r in read_questions(qa_dir / name) for a in r.answers}
    rng = random.Random(params.seed)
    counts: dict[str, int] = {}
    overlap = 0
    for t in QUESTION_TYPES:
        name = suite_name(t, corpus_source)
        of_type = [r for r in heldout if r.type == t]
        chosen = sorted(rng.sample(of_type, min(params.size, len(of_type))), key=lambda r: r.id)
        overlap += sum(any(normalize_answer(a) in trained for a in r.answers) for r in chosen)
        write_jsonl(out_dir / f"{name}.jsonl", [_suite_question(r).to_flashrag() for r in chosen])
        counts[name] = len(chosen)
    return {**counts, "train_answer_overlap": overlap}


def _suite_question(r: QuestionRecord) -> QuestionRecord:
    """A held-out question as its suite holds it: what reports break scores down by (type, hops, ...) as metadata."""
    return QuestionRecord(id=r.id, question=r.question, answers=r.answers,
                          metadata={"type": r.type, "hops": r.hops, "bucket": r.bucket,
                                    "answer_rank": r.features["answer_rank"], "answer_entity": r.answer_entity,
                                    "evidence": r.evidence})
