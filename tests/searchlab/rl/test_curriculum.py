"""The rl curricula: uniform, difficulty levels with replay, SEC's TD(0) bandit, ZeroSearch's noise schedule,
the noisy retriever, and resuming a run from a JSON state."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from searchlab.questions.record import QuestionRecord
from searchlab.retrieval.base import Hit
from searchlab.rl.curriculum import Curriculum, noise_schedule
from searchlab.rl.noisy import NoisyRetriever


def question(qid: str, bucket: str | None, qtype: str = "single") -> QuestionRecord:
    """A training question as the qa stage writes it (only the fields the curriculum reads matter)."""
    return QuestionRecord(id=qid, type=qtype, question=f"q {qid}?", answers=[f"a {qid}"], evidence=[f"p-{qid}"],
                          features={"bucket": bucket})


# three questions per bucket, all of type single
QUESTIONS = [question(f"{b}{i}", b) for b in ("easy", "medium", "hard") for i in range(3)]


def ids(questions: list[QuestionRecord]) -> list[str]:
    return [q.id for q in questions]


def buckets(questions: list[QuestionRecord]) -> Counter:
    return Counter(q.bucket for q in questions)


def feed(c: Curriculum, step: int, bucket: str, successes: list[float]) -> None:
    """Report one result per value in ``successes`` for questions of ``bucket``."""
    qs = [question(f"{bucket}0", bucket)] * len(successes)
    c.update(step, qs, successes, [0.0] * len(successes))


# ---------------------------------------------------------------- uniform


def test_uniform_selection_depends_only_on_seed_and_step():
    a = Curriculum(QUESTIONS, [], seed=7, total_steps=10)
    b = Curriculum(QUESTIONS, [], seed=7, total_steps=10)
    for step in range(3):  # a draws steps 0..2 first; b jumps straight to step 3
        a.select(step, 5)
    assert ids(a.select(3, 5)) == ids(b.select(3, 5))
    assert ids(a.select(3, 5)) == ids(a.select(3, 5))  # selecting again repeats the step
    assert ids(a.select(3, 20)) != ids(a.select(4, 20))
    assert ids(a.select(3, 20)) != ids(Curriculum(QUESTIONS, [], seed=8, total_steps=10).select(3, 20))
    # with replacement, over every bucket
    assert set(buckets(a.select(0, 200))) == {"easy", "medium", "hard"}
    assert a.metrics(0)["curriculum/level"] == 0.0
    assert a.metrics(0)["curriculum/noise_p"] == 0.0


# ---------------------------------------------------------------- difficulty


def test_difficulty_starts_easy_and_advances_only_on_a_full_good_window():
    c = Curriculum(QUESTIONS, ["difficulty"], seed=0, total_steps=10, window=4, advance_at=0.5, replay=0.0)
    assert buckets(c.select(0, 30)) == {"easy": 30}
    assert c.metrics(0)["curriculum/share/easy"] == 1.0
    feed(c, 0, "easy", [1.0, 1.0, 1.0])  # mean 1 but the window (4) is not full
    assert c.level == 0
    feed(c, 1, "medium", [1.0] * 10)  # results of other levels do not count
    assert c.level == 0 and c.state_dict()["window"] == [1.0, 1.0, 1.0]
    c2 = Curriculum(QUESTIONS, ["difficulty"], seed=0, total_steps=10, window=4, advance_at=0.5, replay=0.0)
    feed(c2, 0, "easy", [1.0, 0.0, 0.0, 0.0])  # full, mean .25
    assert c2.level == 0
    feed(c2, 1, "easy", [1.0])  # window slides to [0, 0, 0, 1]: .25
    assert c2.level == 0
    feed(c2, 2, "easy", [1.0])  # [0, 0, 1, 1]: .5 reaches the threshold
    assert c2.level == 1 and c2.state_dict()["window"] == []
    assert buckets(c2.select(3, 30)) == {"medium": 30}
    assert c2.metrics(3)["curriculum/level"] == 1.0
    assert c2.metrics(3)["curriculum/share/medium"] == 1.0
    feed(c2, 3, "medium", [1.0] * 4)
    assert c2.level == 2
    feed(c2, 4, "hard", [1.0] * 12)  # the last level never advances further
    assert c2.level == 2 and buckets(c2.select(5, 10)) == {"hard": 10}


def test_difficulty_levels_are_the_buckets_present():
    qs = [question("m", "medium"), question("h", "hard")]
    c = Curriculum(qs, ["difficulty"], seed=0, total_steps=10, window=1, advance_at=1.0, replay=0.0)
    assert c.levels == ["medium", "hard"] and ids(c.select(0, 3)) == ["m", "m", "m"]
    feed(c, 0, "medium", [1.0])
    assert c.level == 1 and ids(c.select(1, 3)) == ["h", "h", "h"]


def test_replay_draws_only_from_unlocked_earlier_levels():
    c = Curriculum(QUESTIONS, ["difficulty"], seed=3, total_steps=10, window=1, advance_at=1.0, replay=0.5)
    assert buckets(c.select(0, 400)) == {"easy": 400}  # nothing earlier to replay at the first level
    feed(c, 0, "easy", [1.0])
    got = buckets(c.select(1, 400))
    assert set(got) == {"easy", "medium"}  # hard is still locked
    assert abs(got["easy"] / 400 - 0.5) < 0.08
    feed(c, 1, "medium", [1.0])
    got = buckets(c.select(2, 600))
    assert set(got) == {"easy", "medium", "hard"}
    assert abs(got["hard"] / 600 - 0.5) < 0.07  # the replayed half is split between easy and medium
    assert abs(got["easy"] / 600 - 0.25) < 0.06
    m = c.metrics(2)
    assert m["curriculum/share/hard"] == got["hard"] / 600
    assert sum(m[f"curriculum/share/{b}"] for b in ("easy", "medium", "hard")) == pytest.approx(1.0)


# ---------------------------------------------------------------- SEC


SEC_QUESTIONS = [question("se1", "easy", "single"), question("se2", "easy", "single"),
                 question("bh1", "hard", "bridge")]


def test_sec_td0_values_by_hand():
    c = Curriculum(SEC_QUESTIONS, ["sec"], seed=0, total_steps=10, sec_alpha=0.5)
    se, bh = "curriculum/sec/single.easy", "curriculum/sec/bridge.hard"
    assert c.metrics(0)[se] == 0.0 and c.metrics(0)[bh] == 0.0
    # step 0: single.easy r = (0.4 + 0.2) / 2 = 0.3 -> Q = 0 + .5 * .3 = 0.15; bridge.hard r = .8 -> Q = 0.4
    c.update(0, SEC_QUESTIONS, [1.0, 0.0, 0.5], [0.4, 0.2, 0.8])
    assert c.metrics(0)[se] == pytest.approx(0.15) and c.metrics(0)[bh] == pytest.approx(0.4)
    # step 1: only single.easy drawn, r = .5 -> Q = .15 + .5 * (.5 - .15) = 0.325; bridge.hard keeps 0.4
    c.update(1, SEC_QUESTIONS[:1], [1.0], [0.5])
    assert c.metrics(1)[se] == pytest.approx(0.325) and c.metrics(1)[bh] == pytest.approx(0.4)


def test_sec_boltzmann_sampling_favours_the_higher_valued_arm():
    c = Curriculum(SEC_QUESTIONS, ["sec"], seed=1, total_steps=10, sec_alpha=1.0, sec_temperature=1.0)
    c.update(0, SEC_QUESTIONS[2:], [0.5], [1.0])  # alpha 1: Q(bridge.hard) = 1, Q(single.easy) = 0
    expected = math.e / (math.e + 1)  # softmax([1, 0])[0] ~ 0.731
    got = buckets(c.select(1, 2000))
    assert abs(got["hard"] / 2000 - expected) < 0.04
    # at a high temperature the arms come out nearly even
    hot = Curriculum(SEC_QUESTIONS, ["sec"], seed=1, total_steps=10, sec_alpha=1.0, sec_temperature=100.0)
    hot.update(0, SEC_QUESTIONS[2:], [0.5], [1.0])
    assert abs(buckets(hot.select(1, 2000))["hard"] / 2000 - 0.5) < 0.04


def test_sec_with_difficulty_draws_only_unlocked_arms():
    qs = SEC_QUESTIONS + [question("sm1", "medium", "single")]
    c = Curriculum(qs, ["sec", "difficulty"], seed=0, total_steps=10, window=1, advance_at=1.0)
    assert buckets(c.select(0, 100)) == {"easy": 100}
    c.update(0, qs[:1], [1.0], [0.3])
    assert c.level == 1
    assert set(buckets(c.select(1, 300))) == {"easy", "medium"}


# ---------------------------------------------------------------- noise


def test_noise_schedule_by_hand():
    # total_steps 11 -> m = 10; the midpoint is step 5, where b^(i/m) = sqrt(b)
    assert noise_schedule(0, 11, 0.0, 0.5, 2.0) == 0.0
    assert noise_schedule(5, 11, 0.0, 0.5, 2.0) == pytest.approx(0.5 * (math.sqrt(2) - 1))  # 0.20711
    assert noise_schedule(10, 11, 0.0, 0.5, 2.0) == pytest.approx(0.5)
    assert noise_schedule(0, 11, 0.1, 0.6, 10.0) == pytest.approx(0.1)
    assert noise_schedule(5, 11, 0.1, 0.6, 10.0) == pytest.approx(0.1 + (math.sqrt(10) - 1) / 9 * 0.5)  # 0.22013
    assert noise_schedule(10, 11, 0.1, 0.6, 10.0) == pytest.approx(0.6)
    assert noise_schedule(50, 11, 0.1, 0.6, 10.0) == pytest.approx(0.6)  # past the end it stays there
    assert noise_schedule(1, 1, 0.0, 0.5, 2.0) == pytest.approx(0.5)  # a one-step run: m = 1

    c = Curriculum(QUESTIONS, ["noise"], seed=0, total_steps=11, noise_start=0.0, noise_end=0.5, noise_base=2.0)
    assert c.noise_probability(5) == pytest.approx(0.20710678)
    assert c.metrics(5)["curriculum/noise_p"] == pytest.approx(0.20710678)
    assert Curriculum(QUESTIONS, [], seed=0, total_steps=11).noise_probability(10) == 0.0


# ---------------------------------------------------------------- NoisyRetriever


class FixedRetriever:
    """Returns the same k hits d0..d(k-1) for every query, with scores k..1."""

    def __init__(self):
        self.closed = False

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [[Hit(f"d{i}", f"doc {i}", float(k - i)) for i in range(k)] for _ in queries]

    def close(self) -> None:
        self.closed = True


def test_noisy_retriever_replaces_about_p_and_never_duplicates():
    inner = FixedRetriever()
    pool = [(f"p{i}", f"passage {i}") for i in range(40)] + [Hit(f"d{i}", f"doc {i}", 0.0) for i in range(5)]
    noisy = NoisyRetriever(inner, pool, probability=0.3, seed=0)
    results = noisy.search([f"q{i}" for i in range(200)], k=5)
    assert noisy.total == 1000
    assert abs(noisy.replaced / noisy.total - 0.3) < 0.05
    changed = 0
    for hits in results:
        assert len({h.id for h in hits}) == 5  # no passage twice within a query
        assert [h.score for h in hits] == [5.0, 4.0, 3.0, 2.0, 1.0]  # replacements keep the score
        for i, h in enumerate(hits):
            if h.id != f"d{i}":
                changed += 1
                assert h.contents == f"passage {h.id[1:]}" or h.contents == f"doc {h.id[1:]}"
    assert changed == noisy.replaced
    noisy.close()
    assert not inner.closed  # the caller owns the inner retriever

    same = NoisyRetriever(FixedRetriever(), pool, probability=0.3, seed=0).search([f"q{i}" for i in range(200)], 5)
    assert same == results  # seeded


def test_noisy_retriever_at_zero_and_with_an_exhausted_pool():
    inner = FixedRetriever()
    clean = NoisyRetriever(inner, [("p0", "x")], probability=0.0, seed=0)
    assert clean.search(["a", "b"], 3) == inner.search(["a", "b"], 3)
    assert (clean.replaced, clean.total) == (0, 6)
    # every pool passage is already among the hits: nothing can replace them without a duplicate
    stuck = NoisyRetriever(inner, [("d0", "doc 0"), ("d1", "doc 1")], probability=1.0, seed=0)
    assert stuck.search(["a"], 2) == inner.search(["a"], 2) and stuck.replaced == 0
    # one free passage: the first hit takes it, the second has nothing left
    one = NoisyRetriever(inner, [("d0", "doc 0"), ("p", "free")], probability=1.0, seed=0)
    assert [h.id for h in one.search(["a"], 2)[0]] == ["p", "d1"] and one.replaced == 1
    with pytest.raises(ValueError, match="probability"):
        NoisyRetriever(inner, [], probability=1.5, seed=0)
    with pytest.raises(ValueError, match="pool is empty"):
        NoisyRetriever(inner, [], probability=0.5, seed=0).search(["a"], 2)


# ---------------------------------------------------------------- resuming


ALL = [question(f"{t}-{b}{i}", b, t) for t in ("single", "bridge") for b in ("easy", "medium", "hard")
       for i in range(2)]
KW = dict(window=6, advance_at=0.5, replay=0.25, sec_alpha=0.5, noise_base=10.0)


def outcome(questions: list[QuestionRecord]) -> tuple[list[float], list[float]]:
    """Deterministic stand-ins for the trainer's group means: success by type, |advantage| by bucket."""
    success = [1.0 if q.type == "single" else 0.5 for q in questions]
    advantage = [{"easy": 0.1, "medium": 0.6, "hard": 0.3}[q.bucket] for q in questions]
    return success, advantage


def run(c: Curriculum, steps: range) -> list[list[str]]:
    chosen = []
    for step in steps:
        qs = c.select(step, 8)
        chosen.append(ids(qs))
        c.update(step, qs, *outcome(qs))
    return chosen


def test_state_round_trip_through_json_resumes_identically():
    def make() -> Curriculum:
        return Curriculum(ALL, ["difficulty", "sec", "noise"], seed=11, total_steps=10, **KW)

    straight = make()
    whole = run(straight, range(10))

    first = make()
    head = run(first, range(5))
    state = json.loads(json.dumps(first.state_dict()))
    assert state["level"] > 0 and any(q for _, _, q in state["q_values"])  # the state is not trivial
    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.metrics(4) == first.metrics(4)
    tail = run(resumed, range(5, 10))
    assert head + tail == whole
    assert resumed.state_dict() == straight.state_dict()
    assert resumed.metrics(9) == straight.metrics(9)
    assert run(make(), range(5, 10)) != tail  # without the state the same steps pick differently


# ---------------------------------------------------------------- errors


def test_errors_name_the_bad_kind_or_value():
    with pytest.raises(ValueError, match=r"'bandit'.*allowed: difficulty, sec, noise"):
        Curriculum(QUESTIONS, ["sec", "bandit"], seed=0, total_steps=10)
    with pytest.raises(ValueError, match="questions is empty"):
        Curriculum([], [], seed=0, total_steps=10)
    with pytest.raises(ValueError, match="noise_base"):
        Curriculum(QUESTIONS, ["noise"], seed=0, total_steps=10, noise_base=1.0)
    with pytest.raises(ValueError, match="noise_end"):
        Curriculum(QUESTIONS, ["noise"], seed=0, total_steps=10, noise_end=1.5)
    with pytest.raises(ValueError, match="replay"):
        Curriculum(QUESTIONS, ["difficulty"], seed=0, total_steps=10, replay=-0.1)
    with pytest.raises(ValueError, match="sec_temperature"):
        Curriculum(QUESTIONS, ["sec"], seed=0, total_steps=10, sec_temperature=0.0)
    with pytest.raises(ValueError, match=r"'x'.*bucket"):
        Curriculum([question("x", None)], ["difficulty"], seed=0, total_steps=10)
    c = Curriculum(QUESTIONS, ["difficulty"], seed=0, total_steps=10)
    with pytest.raises(ValueError, match="one to one"):
        c.update(0, QUESTIONS[:2], [1.0], [0.1, 0.2])
    with pytest.raises(ValueError, match="absolute"):
        c.update(0, QUESTIONS[:1], [1.0], [-0.2])
    with pytest.raises(ValueError, match="level 5"):
        c.load_state_dict({"level": 5, "window": [], "q_values": [], "shares": {}})
