"""Protocol rates and sample records of agent episodes, computed from real parses of the completions."""

from __future__ import annotations

import pytest

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import INVALID_ACTION_FEEDBACK
from searchlab.agent.samples import (
    found_evidence,
    protocol_rates,
    render_markdown,
    spread_sample,
    trajectory_record,
)
from searchlab.questions.record import QuestionRecord

INFO = "\n\n<information>Doc 1(Title: Kelmora) Kelmora was founded in 1167.\n</information>\n\n"
GOOD = Rollout("When was Kelmora founded?", "p", completion=(
    "<think>I need Kelmora.</think>\n<search>Kelmora founded</search>" + INFO + "<answer>1167</answer>"),
    answer="1167", searches=["Kelmora founded"], retrieved=[["k-0", "k-1"]], turns=2, finished=True)
WRONG = Rollout("When was Halkrelt founded?", "p", completion=(
    "<search>Halkrelt</search>" + INFO + "<answer>1167</answer>"),
    answer="1167", searches=["Halkrelt"], retrieved=[["k-0"]], turns=2, finished=True)
LOST = Rollout("Who?", "p", completion="I do not know" + INVALID_ACTION_FEEDBACK + "still nothing",
               turns=2, invalid_actions=2)
QUESTIONS = [QuestionRecord(id="a", type="single", question="When?", answers=["1167"], evidence=["k-0"]),
             QuestionRecord(id="b", type="single", question="When?", answers=["1290"], evidence=["h-0"]),
             QuestionRecord(id="c", type="bridge", question="Who?", answers=["X"], evidence=["x-0", "y-1"])]


def test_protocol_rates_count_each_property_separately():
    rates = protocol_rates([GOOD, WRONG, LOST], QUESTIONS)
    third, two_thirds = round(1 / 3, 4), round(2 / 3, 4)
    assert rates["searched"] == two_thirds and rates["answered"] == two_thirds
    assert rates["well_formed"] == two_thirds  # WRONG has no <think>, which the protocol tolerates
    assert rates["found_evidence"] == third and rates["exact_match"] == third
    assert rates["mean_searches"] == round(2 / 3, 3) and rates["invalid_action_rate"] == round(2 / 6, 4)
    assert rates["prompt_copied_queries"] == 0.0
    with pytest.raises(ValueError, match="2 episodes for 3 questions"):
        protocol_rates([GOOD, WRONG], QUESTIONS)


def test_a_query_made_only_of_the_prompt_s_words_counts_as_copied():
    searches = [" Query ", "the search query", "query Kelmora"]
    copier = Rollout("q", "p", completion="".join(f"<search>{s}</search>{INFO}" for s in searches),
                     searches=searches, retrieved=[["k-0"], ["k-1"], ["k-2"]], turns=3)
    rates = protocol_rates([copier, GOOD], QUESTIONS[:2])
    assert rates["prompt_copied_queries"] == 0.5  # two of four copy the prompt; "query Kelmora" searches


def test_evidence_must_all_be_found_across_searches():
    two = Rollout("q", "p", searches=["a", "b"], retrieved=[["x-0", "z"], ["y-1"]])
    assert found_evidence(two, ["x-0", "y-1"]) and not found_evidence(two, ["x-0", "w"])


def test_spread_sample_takes_every_type_in_turn_and_is_seeded():
    pool = [QuestionRecord(id=f"{t}{i}", type=t, question="?", answers=["a"]) for t in ("single", "bridge", "compose")
            for i in range(10)]
    five = spread_sample(pool, 5, seed=1)
    assert [q.type for q in five] == ["bridge", "compose", "single", "bridge", "compose"]
    assert five == spread_sample(pool, 5, seed=1) and five != spread_sample(pool, 5, seed=2)
    assert len(spread_sample(pool, 100, seed=0)) == 30 and spread_sample([], 5, seed=0) == []


def test_records_and_markdown_say_what_happened():
    record = trajectory_record(LOST, QUESTIONS[2])
    assert record["prediction"] is None and not record["exact_match"] and not record["found_evidence"]
    assert "no <answer>" in record["problems"]
    page = render_markdown([trajectory_record(GOOD, QUESTIONS[0]), record], "Samples")
    assert page.startswith("# Samples") and "## a (single): correct" in page and "## c (bridge): wrong" in page
    assert "<search>Kelmora founded</search>" in page and "**Protocol problems:** " in page
