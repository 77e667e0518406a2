"""The held-out world suites: one FlashRAG JSONL per question type, sampled from the held-out questions."""

from __future__ import annotations

import random
from pathlib import Path

from searchlab.jsonl import read_jsonl, write_jsonl
from searchlab.params import QUESTION_TYPES, BenchmarksParams
from searchlab.scoring import normalize_answer


def suite_name(question_type: str) -> str:
    """``"bridge"`` → ``"world-bridge"``: the benchmark name of a question type."""
    return f"world-{question_type}"


def write_suites(params: BenchmarksParams, qa_dir: Path, out_dir: Path) -> dict[str, int]:
    """Write ``out_dir/world-<type>.jsonl`` (``{id, question, golden_answers, metadata}``) from
    ``qa_dir/heldout.jsonl``; return question counts per suite and the answer overlap with training (must be 0)."""
    heldout = read_jsonl(qa_dir / "heldout.jsonl")
    trained = {normalize_answer(a) for name in ("train.jsonl", "dev.jsonl")
               for r in read_jsonl(qa_dir / name) for a in r["answers"]}
    rng = random.Random(params.seed)
    counts: dict[str, int] = {}
    overlap = 0
    for t in QUESTION_TYPES:
        of_type = [r for r in heldout if r["type"] == t]
        chosen = sorted(rng.sample(of_type, min(params.size, len(of_type))), key=lambda r: r["id"])
        rows = [{"id": r["id"], "question": r["question"], "golden_answers": r["answers"],
                 "metadata": {"type": t, "hops": r["hops"], "bucket": r["features"]["bucket"],
                              "answer_rank": r["features"]["answer_rank"], "answer_entity": r["answer_entity"],
                              "evidence": r["evidence"]}} for r in chosen]
        overlap += sum(any(normalize_answer(a) in trained for a in r["golden_answers"]) for r in rows)
        write_jsonl(out_dir / f"{suite_name(t)}.jsonl", rows)
        counts[suite_name(t)] = len(rows)
    return {**counts, "train_answer_overlap": overlap}
