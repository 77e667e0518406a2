"""The clpo curriculum on a real synthetic world: CLPO's online classification by group success, restructuring of
too-hard chains into their later hops, rephrasing of questions in reach, the qa stage's checks on every rewrite,
and resuming a run from its JSON state."""

from __future__ import annotations

import copy
import json
import random
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from searchlab.corpus.kb import KB, Entity
from searchlab.questions.record import QuestionRecord
from searchlab.rl.config import CLPOParams, RLParams
from searchlab.rl.curriculum import Curriculum
from searchlab.rl.restructure import Restructurer, chain_facts, clpo_restructurer
from searchlab.scoring import normalize_answer
from searchlab.synth.generate import Builder


@pytest.fixture(scope="module")
def corpus(synth_corpus) -> Path:
    """A 400-entity synthetic world (corpus.jsonl and kb.jsonl): the qa stage's tests' one, generated once per run
    (tests/searchlab/conftest.py)."""
    return synth_corpus


@pytest.fixture(scope="module")
def kb(corpus) -> KB:
    return KB.load(corpus)


@pytest.fixture(scope="module")
def questions(kb) -> dict[str, list[QuestionRecord]]:
    """Training questions by type, built by the synthesis Builder and written as the qa stage writes them."""
    builder = Builder(kb, random.Random(0))
    out: dict[str, list[QuestionRecord]] = {}
    for kind in ("single", "bridge", "compose", "compare"):
        for target in list(kb.entities)[:120]:
            q = builder.build(kind, target, f"{kind}-{target}-0")
            if q is not None:
                record = replace(q.to_record(), features={"bucket": "medium", "hops": q.hops,
                                                          "cues": len(q.constraints)})
                out.setdefault(kind, []).append(record)
    return out


def clpo(questions: list[QuestionRecord], restructurer: Restructurer | None, seed: int = 0, **params) -> Curriculum:
    return Curriculum(questions, ["clpo"], seed=seed, total_steps=20, rl=RLParams(clpo=CLPOParams(**params)),
                      restructurer=restructurer)


def added(c: Curriculum) -> list[QuestionRecord]:
    return c.pool[len(c.questions):]


# ---------------------------------------------------------------- restructuring a too-hard chain


def test_a_too_hard_bridge_becomes_its_last_hop_with_the_bridge_entity_named(kb, questions):
    bridge = questions["bridge"][0]
    first, last = bridge.constraints
    c = clpo(questions["bridge"][:5], Restructurer(kb))
    c.update(0, [bridge], [0.0], [0.0])

    [log] = c.restructured
    assert log["kind"] == "easier" and log["verified"] and log["reason"] == "ok"
    assert log["step"] == 0 and log["source_id"] == bridge.id and log["source_question"] == bridge.question
    [easier] = added(c)
    assert (log["id"], log["question"], log["answers"]) == (easier.id, easier.question, easier.answers)
    assert easier.derived_from == bridge.id and easier.restructure == "easier"
    assert easier.answers == bridge.answers
    # the last hop alone, its subject (the bridge entity) named, the first hop's subject gone
    assert easier.constraints == [last] and easier.evidence == [last["passage"]]
    assert easier.type == "single" and easier.hops == 1 and easier.mentions == [first["value"]]
    assert kb[first["value"]].name in easier.question
    assert kb[first["subject"]].name not in easier.question
    assert any(a in kb.passages[last["passage"]] for a in easier.answers)  # the reward's gold is in its evidence
    assert easier.features["bucket"] == bridge.features["bucket"]
    # the rewrite enters the draw, and a second failure of the source does not rewrite it again
    assert easier.id in {q.id for q in c.select(1, 200)}
    c.update(1, [bridge], [0.0], [0.0])
    assert len(c.restructured) == 1
    m = c.metrics(1)
    assert (m["curriculum/clpo/too_hard"], m["curriculum/clpo/restructured"], m["curriculum/clpo/verified"],
            m["curriculum/clpo/pool"]) == (1.0, 1.0, 1.0, 6.0)


def test_a_too_hard_compose_question_loses_one_hop_per_restructuring(kb, questions):
    compose = next(q for q in questions["compose"] if q.hops == 4)
    c = clpo([compose], Restructurer(kb))
    c.update(0, [compose], [0.0], [0.0])
    [three] = added(c)
    assert three.hops == 3 and three.constraints == compose.constraints[1:]
    c.update(1, [three], [0.0], [0.0])  # still too hard: one hop fewer again
    two = added(c)[-1]
    assert two.derived_from == three.id and two.constraints == compose.constraints[2:]
    assert two.answers == three.answers == compose.answers


def test_a_question_in_reach_gets_a_rephrasing_with_the_same_chain(kb, questions):
    bridge = questions["bridge"][1]
    c = clpo([bridge], Restructurer(kb))
    c.update(0, [bridge], [0.5], [0.3])
    [log] = c.restructured
    assert log["kind"] == "rephrased" and log["verified"]
    [other] = added(c)
    assert other.restructure == "rephrased" and other.derived_from == bridge.id
    assert normalize_answer(other.question) != normalize_answer(bridge.question)
    assert other.constraints == bridge.constraints and other.answers == bridge.answers
    c.update(1, [other], [0.5], [0.3])  # a rephrasing is not rephrased again
    assert len(c.restructured) == 1 and c.metrics(1)["curriculum/clpo/rephrased"] == 1.0


def test_off_switches_and_questions_that_are_no_chain(kb, questions):
    bridge, compare = questions["bridge"][0], questions["compare"][0]
    quiet = clpo([bridge], None, restructure=False, diversify=False)
    quiet.update(0, [bridge], [0.0], [0.0])
    assert quiet.restructured == [] and quiet.metrics(0)["curriculum/clpo/too_hard"] == 1.0
    c = clpo([compare], Restructurer(kb))
    c.update(0, [compare], [0.0], [0.0])  # too hard, two "hops", but a comparison has no chain to shorten
    assert c.restructured == [] and added(c) == [] and c.metrics(0)["curriculum/clpo/too_hard"] == 1.0
    assert Restructurer(kb).easier(compare, "0").reason == "not_a_chain"
    assert Restructurer(kb).easier(questions["single"][0], "0").reason == "single_hop"


# ---------------------------------------------------------------- mastered questions


def test_a_mastered_question_is_no_longer_drawn_at_weight_zero(kb, questions):
    qs = questions["single"][:4]
    c = clpo(qs, Restructurer(kb))
    assert qs[0].id in {q.id for q in c.select(0, 200)}
    c.update(0, qs[:1], [1.0], [0.0])
    assert c.metrics(0)["curriculum/clpo/mastered"] == 1.0 and c.restructured == []
    assert qs[0].id not in {q.id for q in c.select(1, 400)}
    c.update(1, qs[1:], [1.0] * 3, [0.0] * 3)  # everything mastered: the draw falls back to uniform
    assert {q.id for q in c.select(2, 400)} == {q.id for q in qs}
    half = clpo(qs, Restructurer(kb), mastered_weight=0.5)
    half.update(0, qs[:1], [1.0], [0.0])
    share = sum(q.id == qs[0].id for q in half.select(1, 4000)) / 4000
    assert abs(share - 0.5 / 3.5) < 0.03


# ---------------------------------------------------------------- verification


def _tampered(kb: KB, **names: str) -> KB:
    """A copy of ``kb`` with entities renamed (``entity id -> new name``); indexes rebuilt."""
    entities = {eid: Entity(e.id, e.type, e.subtype, names.get(eid, e.name), e.passages, e.facts)
                for eid, e in kb.entities.items()}
    return KB(entities, dict(kb.passages))


def test_a_rewrite_whose_bridge_entity_is_not_unique_is_refused_and_logged(kb, questions):
    bridge = questions["bridge"][0]
    hub = kb[bridge.constraints[0]["value"]]
    twin = next(e for e in kb.entities.values() if e.type == hub.type and e.id != hub.id)
    shared = _tampered(kb, **{twin.id: hub.name})  # another entity of its type now bears the bridge's name
    c = clpo([bridge], Restructurer(shared))
    c.update(0, [bridge], [0.0], [0.0])
    assert [(r["kind"], r["verified"], r["reason"], r["question"]) for r in c.restructured] == [
        ("easier", False, "ambiguous_name", None)]
    assert added(c) == [] and c.metrics(0)["curriculum/clpo/verified"] == 0.0


def test_verification_rechecks_uniqueness_and_the_evidence_against_the_kb(kb, questions):
    bridge = questions["bridge"][0]
    last = bridge.constraints[-1]
    built = Restructurer(kb).build(chain_facts(kb, bridge)[1:], "x", random.Random(0))
    assert Restructurer(kb).verify(built, bridge) == "ok"
    # a second entity named like the hop's subject, with a value of its own: the name no longer fixes the answer
    hub = kb[last["subject"]]
    twin = next(e for e in kb.entities.values() if e.type == hub.type and e.id != hub.id
                and any(f.value != last["value"] for f in e.facts.get(last["predicate"], ())))
    assert Restructurer(_tampered(kb, **{twin.id: hub.name})).verify(built, bridge) == "not_unique"
    # the passage no longer states the fact: the qa stage's evidence check refuses it, and the curriculum logs it
    blanked = KB(kb.entities, {**kb.passages, last["passage"]: f'"{hub.name}"\nNothing to say.'})
    c = clpo([bridge], Restructurer(blanked))
    c.update(3, [bridge], [0.0], [0.0])
    [log] = c.restructured
    assert (log["step"], log["verified"], log["reason"]) == (3, False, "evidence_unmatched")
    assert log["question"] and log["answers"] == bridge.answers and added(c) == []
    assert Restructurer(kb).verify(built, replace(bridge, answers=["something else"])) == "answer_changed"
    assert Restructurer(kb).verify(built, bridge, {normalize_answer(built.question)}) == "duplicate"


# ---------------------------------------------------------------- resuming


def _success(q: QuestionRecord) -> float:
    """A made-up but fixed group success per question: some too hard, some in reach, some mastered."""
    return (0.0, 0.5, 1.0)[zlib.crc32(q.id.encode()) % 3]


def _run(c: Curriculum, steps) -> list[list[str]]:
    drawn = []
    for step in steps:
        chosen = c.select(step, 6)
        c.update(step, chosen, [_success(q) for q in chosen], [0.1] * len(chosen))
        drawn.append([q.id for q in chosen])
    return drawn


def test_state_round_trip_through_json_resumes_identically(kb, questions):
    pool = questions["bridge"][:10] + questions["compose"][:6] + questions["single"][:6]
    restructurer = Restructurer(kb)
    straight = clpo(pool, restructurer, seed=5)
    _run(straight, range(4))
    state = json.loads(json.dumps(straight.state_dict()))
    assert state["clpo"]["added"] and state["clpo"]["verdicts"] and state["clpo"]["restructured"]
    tail = _run(straight, range(4, 10))

    resumed = clpo(copy.deepcopy(pool), restructurer, seed=5)
    resumed.load_state_dict(state)
    assert _run(resumed, range(4, 10)) == tail
    assert resumed.state_dict() == straight.state_dict() and resumed.restructured == straight.restructured
    assert _run(clpo(pool, restructurer, seed=5), range(4, 10)) != tail  # without the state the draws differ
    with pytest.raises(ValueError, match="derived from"):
        clpo(pool[1:], restructurer, seed=5).load_state_dict(
            {**state, "clpo": {**state["clpo"], "added": [{"id": "x", "question": "X?", "answers": ["x"],
                                                       "derived_from": "nowhere"}]}})
    with pytest.raises(ValueError, match="without the clpo curriculum"):
        clpo(pool, restructurer).load_state_dict({k: v for k, v in state.items() if k != "clpo"})


# ---------------------------------------------------------------- configuration


def test_configuration_errors(kb, questions, tmp_path):
    qs = questions["single"][:2]
    with pytest.raises(ValueError, match="no restructurer"):
        clpo(qs, None)
    with pytest.raises(ValueError, match="cannot be combined with sec"):
        Curriculum(qs, ["clpo", "sec"], seed=0, total_steps=5, restructurer=Restructurer(kb))
    with pytest.raises(ValueError, match=r"rl.clpo.too_hard_at \(0.5\) must lie below rl.clpo.mastered_at"):
        CLPOParams(too_hard_at=0.5, mastered_at=0.5)
    Curriculum(qs, ["noise", "clpo"], seed=0, total_steps=5, restructurer=Restructurer(kb))  # noise combines
    # the rl stage refuses a corpus without a KB before loading anything (model, tokenizer, retriever unused)
    (tmp_path / "corpus.jsonl").write_text("")
    rl = RLParams(curriculum=["clpo"])
    from searchlab.rl.train import build_trainer
    from tests.searchlab.rl.rlworld import rl_job

    with pytest.raises(ValueError, match=r"rl\.clpo\.restructure"):
        build_trainer(rl_job(rl, tmp_path / "train.jsonl", tmp_path / "corpus.jsonl", tmp_path), None, None, None)
    assert clpo_restructurer(["clpo"], CLPOParams(restructure=False, diversify=False), tmp_path) is None
    assert clpo_restructurer(["noise"], CLPOParams(), tmp_path) is None


def test_clpo_params_that_cannot_work_are_refused_naming_the_key():
    with pytest.raises(ValueError, match="rl.curriculum: clpo draws from its own pool"):
        RLParams(curriculum=["clpo", "sec"])
    with pytest.raises(ValueError, match=r"rl.clpo.too_hard_at \(0.5\) must lie below rl.clpo.mastered_at"):
        RLParams(curriculum=["clpo"], clpo={"too_hard_at": 0.5, "mastered_at": 0.5})
    RLParams(curriculum=["clpo", "noise"])
