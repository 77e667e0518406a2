"""rl.questions: the qa stage's training questions, the selfplay stage's verified questions, or both."""

from __future__ import annotations

import json

import pytest

from searchlab.jsonl import read_jsonl
from searchlab.rl.config import RLParams
from searchlab.rl.train import gather_questions, training_questions


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_selfplay_questions_join_the_qa_stage_s_with_buckets_from_the_solver_s_success(tmp_path):
    qa = _write(tmp_path / "train.jsonl", [{"id": "q1", "type": "single", "question": "Who?", "answers": ["A"],
                                            "evidence": ["p1"], "features": {"bucket": "medium"}}])
    selfplay = _write(tmp_path / "questions.jsonl", [
        {"round": 0, "question": "Where was X born?", "answer": "Y", "verified": True, "solver_success": 0.8},
        {"round": 0, "question": "Bad?", "answer": "Z", "verified": False, "solver_success": None},
        {"round": 1, "question": "When was X born?", "answer": "1901", "verified": True, "solver_success": 0.0}])
    counts = gather_questions({"qa": qa, "selfplay": selfplay}, tmp_path / "all.jsonl")
    assert counts == {"questions.qa": 1, "questions.selfplay": 2}
    rows = read_jsonl(tmp_path / "all.jsonl")
    assert [(r["question"], r["answers"], r["features"]["bucket"]) for r in rows] == [
        ("Who?", ["A"], "medium"), ("Where was X born?", ["Y"], "easy"), ("When was X born?", ["1901"], "hard")]
    assert rows[1]["type"] == "selfplay" and rows[1]["evidence"] is None and len({r["id"] for r in rows}) == 3
    assert [q.question for q in training_questions(tmp_path / "all.jsonl", ["hard"])] == ["When was X born?"]

    gather_questions({"selfplay": _write(tmp_path / "none.jsonl", [])}, tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match="rl.questions"):
        training_questions(tmp_path / "empty.jsonl", ["easy"])


def test_rl_questions_names_each_set_once():
    assert RLParams().questions == ["qa"]
    for bad in ([], ["qa", "qa"]):
        with pytest.raises(ValueError, match="rl.questions"):
            RLParams(questions=bad)
