"""The sft stage's check that ``rollout.max_turns`` leaves every demonstrated episode room to answer."""

from __future__ import annotations

import json
import logging

from searchlab.agent.protocol import DemoStep, render_demonstration
from searchlab.params import RolloutParams
from searchlab.retrieval.base import Hit
from searchlab.train.samples import warn_if_turns_fall_short

PASSAGE = Hit("p1", '"Ardel"\nArdel lies in Fonia.', 3.0)


def _write_demos(path, searches_per_demo):
    with open(path, "w", encoding="utf-8") as f:
        for n in searches_per_demo:
            steps = [DemoStep(f"Hop {i}.", f"query {i}", [PASSAGE]) for i in range(n)]
            f.write(json.dumps({"completion": render_demonstration(steps, "Done.", "Fonia")}) + "\n")


def test_warns_when_the_deepest_demonstration_cannot_answer_within_max_turns(tmp_path, caplog):
    demos = tmp_path / "demos.jsonl"
    _write_demos(demos, [1, 3, 2])
    with caplog.at_level(logging.WARNING, logger="searchlab"):
        assert warn_if_turns_fall_short(demos, RolloutParams(max_turns=3)) == 3
    [record] = caplog.records
    assert "rollout.max_turns is 3" in record.getMessage() and "at least 4" in record.getMessage()


def test_silent_when_every_demonstration_has_a_turn_left_to_answer(tmp_path, caplog):
    demos = tmp_path / "demos.jsonl"
    _write_demos(demos, [1, 3, 2])
    with caplog.at_level(logging.WARNING, logger="searchlab"):
        assert warn_if_turns_fall_short(demos, RolloutParams(max_turns=4)) == 3
    assert not caplog.records
