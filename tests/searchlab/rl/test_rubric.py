"""The citation-aware rubric reward (CaRR / C-GRPO) on hand-made episodes written with the real protocol."""

from __future__ import annotations

import pytest

from searchlab.agent import DemoStep, Rollout, information_block, parse_trajectory, render_demonstration
from searchlab.retrieval.base import Hit
from searchlab.rl.rewards import RewardParams, reward
from searchlab.rl.rubric import Rubric, check_rubrics, rubric_score, rubrics

QUESTION = "When was the city where Stimina Rembroumsen was born founded?"
ANSWERS = ["1167"]
# the question's evidence chain, as QA synthesis writes it into train.jsonl
CHAIN = [
    {"text": "Stimina Rembroumsen was born in Althouhelm.", "predicate": "born_in", "op": "hop", "subject": "e0",
     "value": "e406", "passage": "e0-1", "via": None, "value_text": "Althouhelm"},
    {"text": "Althouhelm was founded in 1167.", "predicate": "founded_year", "op": "hop", "subject": "e406",
     "value": 1167, "passage": "e406-1", "via": None, "value_text": "1167"},
]
BORN = Hit("e0-1", '"Stimina Rembroumsen"\nStimina Rembroumsen was born in Althouhelm.', 9.0)
NAMESAKE = Hit("e0-0", '"Stimina Rembroumsen"\nStimina Rembroumsen was a painter.', 8.0)
FOUNDED = Hit("e406-1", '"Althouhelm"\nAlthouhelm was founded in 1167.', 9.0)
ABBEY = Hit("e9-0", '"Althouhelm Abbey"\nThe abbey of Althouhelm is old.', 7.0)

C_GRPO = RewardParams(metric="em", format_penalty=0.2, evidence_bonus=0.0, max_answer_words=5, rubric_weight=0.3)
OFF = C_GRPO.model_copy(update={"rubric_weight": 0.0})


def episode(completion: str, answer: str | None, retrieved: list[list[str]]) -> Rollout:
    """A finished Rollout as the rollout loop leaves it."""
    return Rollout(question=QUESTION, prompt="p", completion=completion, answer=answer,
                   searches=parse_trajectory(completion).searches, retrieved=retrieved,
                   turns=len(retrieved) + 1, finished=answer is not None)


def chained(cite_born: str = "e0-1", answer: str = "1167") -> Rollout:
    """Both hops searched, each fact stated in the next think and its passage cited (hop 1: ``cite_born``)."""
    steps = [DemoStep("I need the birthplace of Stimina Rembroumsen.", "Stimina Rembroumsen born",
                      [NAMESAKE, BORN], cite=(cite_born,)),
             DemoStep("She was born in Althouhelm. Now its founding year.", "Althouhelm founded",
                      [ABBEY, FOUNDED], cite=("e406-1",))]
    text = render_demonstration(steps, "Althouhelm was founded in 1167.", answer)
    return episode(text, answer, [["e0-0", "e0-1"], ["e9-0", "e406-1"]])


def test_a_lucky_guess_without_an_evidence_chain_earns_the_outcome_reward_only():
    guess = episode("<think>Probably 1167.</think>\n<answer> 1167 </answer>", "1167", [])
    r = reward(guess, ANSWERS, params=C_GRPO, chain=CHAIN)
    assert (r.outcome, r.rubric) == (1.0, 0.0)
    assert r.total == pytest.approx(1 - C_GRPO.rubric_weight)
    assert [(c.named, c.supported) for c in check_rubrics(guess, rubrics(CHAIN, ANSWERS))] == [
        (False, False), (True, False)]  # the guess names the answer but cites nothing


def test_a_full_chain_with_correct_citations_earns_the_rubric_reward_too():
    r = reward(chained(), ANSWERS, params=C_GRPO, chain=CHAIN)
    assert (r.outcome, r.rubric, r.total) == (1.0, 1.0, pytest.approx(1.0))
    assert r.total > reward(episode("<answer> 1167 </answer>", "1167", []), ANSWERS, params=C_GRPO, chain=CHAIN).total


def test_citing_a_passage_that_does_not_state_the_entity_earns_nothing_for_that_hop():
    wrong = chained(cite_born="e0-0")  # Doc 1 of the first block: the painter page, no birthplace
    assert "<cite> Doc 1 </cite>" in wrong.completion
    assert [c.satisfied for c in check_rubrics(wrong, rubrics(CHAIN, ANSWERS))] == [False, True]
    r = reward(wrong, ANSWERS, params=C_GRPO, chain=CHAIN)
    assert r.rubric == 0.5 and r.total == pytest.approx(0.7 + 0.3 * 0.5)


def test_a_passage_that_merely_mentions_the_entity_is_not_its_evidence():
    """The abbey page names Althouhelm but is not the passage that states where she was born."""
    steps = [DemoStep("Birthplace?", "Stimina Rembroumsen born", [NAMESAKE, BORN]),
             DemoStep("She was born in Althouhelm.", "Althouhelm founded", [ABBEY, FOUNDED])]
    text = render_demonstration(steps, "So 1167.", "1167").replace(
        "<think>So 1167.</think>\n", "<think>So 1167.</think>\n<cite> Doc 1, Doc 2 </cite>\n")
    abbey = episode(text, "1167", [["e0-0", "e0-1"], ["e9-0", "e406-1"]])
    assert [(c.named, c.supported) for c in check_rubrics(abbey, rubrics(CHAIN, ANSWERS))] == [
        (True, False), (True, True)]


def test_a_hidden_entity_named_only_inside_an_information_block_does_not_count():
    steps = [DemoStep("I need her birthplace.", "Stimina Rembroumsen born", [BORN], cite=("e0-1",)),
             DemoStep("Found it. Now when that city was founded.", "founding year of her birth city",
                      [FOUNDED], cite=("e406-1",))]
    text = render_demonstration(steps, "So the answer is 1167.", "1167")
    silent = episode(text, "1167", [["e0-1"], ["e406-1"]])
    assert "Althouhelm" in text  # the passages say it ...
    assert [(c.named, c.supported) for c in check_rubrics(silent, rubrics(CHAIN, ANSWERS))] == [
        (False, True), (True, True)]  # ... the agent never does
    assert rubric_score(silent, CHAIN, ANSWERS) == 0.5


def test_a_wrong_answer_earns_no_rubric_reward_however_well_cited():
    r = reward(chained(answer="1168"), ANSWERS, params=C_GRPO, chain=CHAIN)
    assert (r.outcome, r.rubric, r.total) == (0.0, 1.0, 0.0)  # the whole chain shown, the answer miscopied


def test_a_passage_cut_off_by_the_token_budget_supports_nothing():
    block = information_block([BORN], max_tokens=10)
    assert "Althouhelm" not in block and "Doc 1" in block
    text = ("<think>Birthplace?</think>\n<search> Stimina Rembroumsen born </search>" + block
            + "<think>Althouhelm, I believe.</think>\n<cite> Doc 1 </cite>\n<answer> 1167 </answer>")
    cut = episode(text, "1167", [["e0-1"]])
    assert [(c.named, c.supported) for c in check_rubrics(cut, rubrics(CHAIN, ANSWERS))][0] == (True, False)


def test_weight_zero_reproduces_the_old_rewards():
    episodes = [chained(), chained(cite_born="e0-0"), chained(answer="1168"),
                episode("<think>Probably 1167.</think>\n<answer> 1167 </answer>", "1167", []),
                episode("<think>hmm</think>", None, [])]
    for e in episodes:
        old = reward(e, ANSWERS, params=OFF)
        assert reward(e, ANSWERS, params=OFF, chain=CHAIN) == old
        assert old.rubric == 0.0 and old.total == old.outcome + old.format + old.evidence
    assert reward(chained().completion, ANSWERS, params=OFF, chain=CHAIN) == reward(
        chained().completion, ANSWERS, params=OFF)  # a string is fine while the rubric is off


def test_no_chain_means_no_rubric_and_a_string_cannot_be_checked():
    assert reward(chained(), ANSWERS, params=C_GRPO) == reward(chained(), ANSWERS, params=OFF)
    assert reward(chained(), ANSWERS, params=C_GRPO, chain=[]) == reward(chained(), ANSWERS, params=OFF)
    with pytest.raises(ValueError, match="retrieved passage ids"):
        reward(chained().completion, ANSWERS, params=C_GRPO, chain=CHAIN)


def test_a_hack_earns_no_rubric_reward():
    r = reward(chained(answer="1167 or 1168"), ANSWERS, params=C_GRPO, chain=CHAIN)
    assert r.hack and (r.total, r.rubric) == (0.0, 0.0)


def test_rubrics_of_every_question_type():
    compare = [{"op": "compare", "text": "Songs of Malketh came out in 2011.", "passage": "e9-0", "value": 2011,
                "value_text": "2011"},
               {"op": "compare", "text": "The Velvet Winter came out in 2017.", "passage": "e1139-0", "value": 2017,
                "value_text": "2017"}]
    assert rubrics(compare, ["The Velvet Winter"]) == [Rubric("2011", "e9-0", compare[0]["text"]),
                                                       Rubric("2017", "e1139-0", compare[1]["text"])]
    oblique = [{"op": "eq", "text": "in the Ronan language", "passage": "e16-0", "value": "Ronan",
                "value_text": "Ronan"},
               {"op": "range", "text": "founded in the 7th century", "passage": "e16-1", "value": 661,
                "value_text": "661"},
               {"op": "via", "text": "lying on a river flowing into the Inbask Sea", "passage": "e16-2",
                "value": "e325", "value_text": "Nelgailt River",
                "via": {"predicate": "mouth", "value": "the Inbask Sea", "subject": "e325", "passage": "e325-0",
                        "value_text": "the Inbask Sea"}}]
    assert [(r.entity, r.passage) for r in rubrics(oblique, ["Vaintholt"])] == [
        ("Vaintholt", "e16-0"),  # the cue's value is in the question; the hidden end is the answer
        ("661", "e16-1"), ("Nelgailt River", "e16-2"), ("Nelgailt River", "e325-0")]
    single = [{"op": "hop", "text": "Shourora Ril died in 1831.", "passage": "e2-0", "value": 1831,
               "value_text": "1831"}]
    assert rubrics(single, "1831") == [Rubric("1831", "e2-0", "Shourora Ril died in 1831.")]
    assert rubrics(single + single, "1831") == rubrics(single, "1831")
    assert rubrics([], "x") == [] and rubric_score(chained(), [], ANSWERS) is None
    with pytest.raises(ValueError, match="no rubric rule"):
        rubrics([{"op": "guess", "passage": "p", "value": 1}], "x")


def test_punctuation_that_normalisation_would_glue_does_not_hide_an_entity():
    """"(1930–2007)" and "949-kilometre" name 2007 and 949; "6,726" is 6726 however it is written."""
    chain = [{"op": "hop", "text": "Lirric Shinson died in 2007.", "passage": "e6-0", "value": 2007,
              "value_text": "2007"},
             {"op": "hop", "text": "The Mibond River is 949 km long.", "passage": "e23-0", "value": 949,
              "value_text": "949"},
             {"op": "hop", "text": "Ebaimhorn rises to 6,726 metres.", "passage": "e334-0", "value": 6726,
              "value_text": "6,726"}]
    hits = [Hit("e6-0", '"Lirric Shinson"\nLirric Shinson (1930–2007) was a mathematician.', 3.0),
            Hit("e23-0", '"Mibond River"\nThe Mibond River is a 949-kilometre river.', 2.0),
            Hit("e334-0", '"Ebaimhorn"\nEbaimhorn rises to 6,726 metres.', 1.0)]
    text = render_demonstration([DemoStep("Facts?", "facts", hits, cite=("e6-0", "e23-0", "e334-0"))],
                                "He died in 2007; the river is 949 km long; the peak is 6726 m.", "6726")
    assert "<cite> Doc 1, Doc 2, Doc 3 </cite>" in text
    assert rubric_score(episode(text, "6726", [["e6-0", "e23-0", "e334-0"]]), chain, ["6726"]) == 1.0
