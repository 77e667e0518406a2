"""Curricula for the rl stage: which questions each optimizer step rolls out, and how noisy retrieval is.

At every step the trainer asks :meth:`Curriculum.select` for ``n`` training questions (the records the qa stage
writes to ``train.jsonl``), rolls each out as a group, and reports back per question the group's mean
success (exact match, in [0, 1]) and mean absolute advantage with :meth:`Curriculum.update`. The curriculum
is built from named parts (``kinds``, the ``rl.curriculum`` list), any subset of the following, each a small
class below built from its own params section (``rl.difficulty``, ``rl.sec``, ``rl.noise``, ``rl.clpo``, which
the params schema has already validated); :meth:`Curriculum.from_params` builds the whole from ``rl``:

* ``"difficulty"`` (:class:`Difficulty`): the difficulty buckets present among the questions
  (``features["bucket"]``, in :data:`searchlab.questions.record.BUCKETS` order) are levels. Questions come from
  the current level, except that a share ``replay`` comes from an earlier level so the easy skills are not
  forgotten; the curriculum advances once the success over the last ``window`` current-level questions reaches
  ``advance_at``.
* ``"sec"`` (:class:`SEC`): the Self-Evolving Curriculum (Chen et al., "Self-Evolving Curriculum for LLM
  Reasoning", arXiv:2505.14970). Each (type, bucket) pair is an arm of a non-stationary bandit whose value
  tracks the mean absolute advantage its questions earn, i.e. how much the policy still learns from them
  (questions it always or never solves have advantage 0). Arms are drawn with Boltzmann probabilities and
  updated with TD(0). With ``"difficulty"`` as well, only the arms of unlocked levels can be drawn (the
  difficulty part then only tracks the level; SEC selects).
* ``"noise"`` (:class:`NoiseSchedule`): ZeroSearch's noise schedule (Sun et al., "ZeroSearch: Incentivize the
  Search Capability of LLMs without Searching", arXiv:2505.04588): the probability that a retrieved document is
  replaced by a distractor rises from ``noise.start`` to ``noise.end`` along an exponential curve, so the agent
  first learns the protocol on clean results and then learns to cope with bad ones.
  :class:`~searchlab.rl.noisy.NoisyRetriever` applies it, with real passages of the corpus as the distractors.
  It is orthogonal to the others: it never chooses questions, it only sets each step's noise probability.
* ``"clpo"`` (:class:`CLPO`): CLPO's online curriculum (Zhang et al., "CLPO: Curriculum Learning meets Policy
  Optimization for LLM Reasoning", arXiv:2509.25004). After every step each question drawn is classified by its
  group's success rate: mastered (``>= mastered_at``: drawn with weight ``mastered_weight`` from then on, 0
  drops it), too hard (``<= too_hard_at``) or in reach (between). A too-hard multi-hop question is restructured
  once into an easier one from its own evidence chain, an in-reach one diversified once with a rephrasing
  (:mod:`searchlab.rl.restructure`); a rewrite that passes the qa stage's checks joins the pool (with
  ``derived_from`` and ``restructure``), and every rewrite tried is logged in :attr:`Curriculum.restructured`
  (comparisons and oblique questions, which have no chain of hops, are left as they are).
  Draws are weighted over that pool; it replaces the difficulty and sec parts, so it combines only with noise.

No choosing part at all is :class:`Uniform` sampling (distinct questions within a step while the pool
allows). Selection is a function of ``(seed, step, state)`` only: each step has its own ``random.Random``
seeded from ``"{seed}/{step}"``, so what earlier steps drew does not matter, and :meth:`Curriculum.state_dict`
is plain JSON, so a killed run resumes identically.

>>> from searchlab.questions.record import QuestionRecord
>>> qs = [QuestionRecord(id="a", type="single", question="A?", answers=["x"], features={"bucket": "easy"}),
...       QuestionRecord(id="b", type="bridge", question="B?", answers=["y"], features={"bucket": "hard"})]
>>> c = Curriculum(qs, ["difficulty"], seed=0, total_steps=10, replay=0.0)
>>> [q.id for q in c.select(0, 3)]
['a', 'a', 'a']
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from typing import get_args

from pydantic import ValidationError

from searchlab.config import Section
from searchlab.questions.record import BUCKETS, QuestionRecord, present
from searchlab.rl.config import (
    CLPOParams,
    CurriculumKind,
    DifficultyCurriculumParams,
    NoiseCurriculumParams,
    RLParams,
    SECParams,
    clpo_clash,
)
from searchlab.rl.restructure import EASIER, NO_CANDIDATE, REPHRASED, Restructured, Restructurer
from searchlab.scoring import normalize_answer

__all__ = ["KINDS", "CLPO", "SEC", "Curriculum", "Difficulty", "NoiseSchedule", "Uniform", "noise_schedule"]

KINDS: tuple[str, ...] = get_args(CurriculumKind)  # the composable parts: difficulty, sec, noise, clpo
MASTERED, IN_REACH, TOO_HARD = "mastered", "in_reach", "too_hard"  # clpo's classes of a question
# The constructor's flat shorthands for single fields of the params sections (tests and scripts use them):
# ``window`` is ``difficulty.window``, ``sec_alpha`` is ``sec.alpha``, ``noise_base`` is ``noise.base``, ...
SHORTHANDS = {"advance_at": "difficulty", "window": "difficulty", "replay": "difficulty",
              "sec_alpha": "sec", "sec_temperature": "sec", "sec_reward": "sec",
              "noise_start": "noise", "noise_end": "noise", "noise_base": "noise"}

Arm = tuple[str, str]  # (question type, difficulty bucket): one SEC bandit arm
Commit = Callable[[], None]  # applies a saved state that has been checked (see Part.loader)


def noise_schedule(step: int, total_steps: int, start: float, end: float, base: float) -> float:
    """ZeroSearch's noise probability at ``step``: ``p_s + (b^(i/m) - 1) / (b - 1) * (p_e - p_s)``.

    ``i`` is the step and ``m = total_steps - 1`` (at least 1, so a one-step run is well defined). Steps past
    ``m`` keep the final probability: extrapolating the curve would leave [0, 1].

    >>> noise_schedule(0, 11, 0.0, 0.5, 2.0), noise_schedule(10, 11, 0.0, 0.5, 2.0)
    (0.0, 0.5)
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    _check_probability("noise_start", start)
    _check_probability("noise_end", end)
    if not base > 1:
        raise ValueError(f"noise_base must be > 1 (the curve divides by base - 1), got {base}")
    m = max(total_steps - 1, 1)
    i = min(step, m)
    return start + (base ** (i / m) - 1) / (base - 1) * (end - start)


def _check_probability(name: str, value: float) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` lies in [0, 1]."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")


def _require_buckets(questions: list[QuestionRecord]) -> None:
    """Raise ``ValueError`` unless every question has a known bucket: the difficulty and sec parts sort questions
    by bucket, and a question without one would silently never be drawn."""
    for q in questions:
        if q.bucket not in BUCKETS:
            raise ValueError(f"question {q.id!r} has bucket {q.bucket!r}; the difficulty and "
                             f"sec curricula need features['bucket'] in {BUCKETS}")


def _arm_name(arm: Arm) -> str:
    """How an arm is named in metrics: ``"<type>.<bucket>"``."""
    return f"{arm[0]}.{arm[1]}"


def _softmax(values: Sequence[float], temperature: float) -> list[float]:
    """Boltzmann probabilities ``softmax(values / temperature)``, shifted by the max so exp cannot overflow."""
    scaled = [v / temperature for v in values]
    top = max(scaled)
    weights = [math.exp(s - top) for s in scaled]
    total = sum(weights)
    return [w / total for w in weights]


def _with_shorthands(section: Section, name: str, shorthands: dict) -> Section:
    """``section`` with the shorthands of its fields in ``shorthands`` set, validated by the section's schema; an
    invalid value raises ``ValueError`` naming the shorthand (``noise_base``), as the caller spelled it."""
    prefix = "" if name == "difficulty" else f"{name}_"
    fields = {k.removeprefix(prefix): v for k, v in shorthands.items() if SHORTHANDS[k] == name}
    if not fields:
        return section
    try:
        return type(section)(**{**section.model_dump(), **fields})
    except ValidationError as e:
        error = e.errors()[0]
        raise ValueError(f"{prefix}{error['loc'][0]}: {error['msg']}, got {error.get('input')!r}") from None


# ---------------------------------------------------------------------------------------------------- parts


class Part:
    """One part of a curriculum: what it learns from each step's outcomes, logs and saves. The defaults do
    nothing, so a part overrides only what it takes part in; a choosing part also has ``select(rng, n)``."""

    def update(self, step: int, questions: list[QuestionRecord], success: list[float], advantage: list[float]) -> None:
        """Take in step ``step``'s outcomes (already checked by :meth:`Curriculum.update`)."""

    def metrics(self) -> dict[str, float]:
        """This part's entries of :meth:`Curriculum.metrics`."""
        return {}

    def state(self) -> dict:
        """This part's keys of :meth:`Curriculum.state_dict` (JSON values)."""
        return {}

    def loader(self, state: dict) -> Commit:
        """Check that a saved ``state`` fits this part and return what restores it: :meth:`Curriculum.load_state_dict`
        checks every part before it changes any, so a state that does not fit leaves the curriculum as it was."""
        return lambda: None


class Uniform(Part):
    """No curriculum: a step's questions are a uniform sample of the training questions, distinct while there are
    enough of them (a step of as many questions as the pool trains on every one), else drawn with replacement."""

    def __init__(self, questions: list[QuestionRecord]):
        self.questions = questions

    def select(self, rng: random.Random, n: int) -> list[QuestionRecord]:
        if n <= len(self.questions):
            return rng.sample(self.questions, n)
        return [rng.choice(self.questions) for _ in range(n)]


class Difficulty(Part):
    """The ``difficulty`` part: levels easy → medium → hard (the buckets present), advancing on a full window of
    current-level successes whose mean reaches ``advance_at``; a share ``replay`` of draws revisits an earlier
    level so the easy skills are not forgotten. With :class:`SEC` beside it, it only gates SEC's arms."""

    def __init__(self, questions: list[QuestionRecord], params: DifficultyCurriculumParams):
        _require_buckets(questions)
        self.params = params
        # in input order: draws depend only on the list, seed and step
        self.by_bucket: dict[str, list[QuestionRecord]] = {}
        for q in questions:
            self.by_bucket.setdefault(q.bucket, []).append(q)
        self.levels = [b for b in BUCKETS if b in self.by_bucket]
        self.level = 0
        self.recent: list[float] = []  # the sliding window of current-level successes

    def unlocked(self) -> set[str]:
        """The buckets of the current level and those before it."""
        return set(self.levels[:self.level + 1])

    def select(self, rng: random.Random, n: int) -> list[QuestionRecord]:
        return [self._draw(rng) for _ in range(n)]

    def _draw(self, rng: random.Random) -> QuestionRecord:
        """One question of the current level, or with probability ``replay`` of a uniformly chosen earlier one."""
        bucket = self.levels[self.level]
        if self.level > 0 and self.params.replay > 0 and rng.random() < self.params.replay:
            bucket = self.levels[rng.randrange(self.level)]
        return rng.choice(self.by_bucket[bucket])

    def update(self, step: int, questions: list[QuestionRecord], success: list[float], advantage: list[float]) -> None:
        """Slide the current level's successes into the window (replayed easier questions say nothing about the
        current level); advance when it is full and good enough."""
        window, advance_at = self.params.window, self.params.advance_at
        for q, s in zip(questions, success):
            if q.bucket != self.levels[self.level]:
                continue
            self.recent.append(float(s))
            del self.recent[:-window]
            last = self.level == len(self.levels) - 1
            if not last and len(self.recent) == window and sum(self.recent) / window >= advance_at:
                self.level += 1
                self.recent = []  # the next level is judged on its own results only

    def metrics(self) -> dict[str, float]:
        return {"curriculum/level": float(self.level)}

    def state(self) -> dict:
        return {"level": self.level, "window": list(self.recent)}

    def loader(self, state: dict) -> Commit:
        level = int(state["level"])
        if not 0 <= level < len(self.levels):
            raise ValueError(f"state level {level} is out of range for the {len(self.levels)} level(s) "
                             f"{self.levels}")
        recent = [float(s) for s in state["window"]][-self.params.window:]

        def commit() -> None:
            self.level, self.recent = level, recent
        return commit


class SEC(Part):
    """The ``sec`` part: a Boltzmann bandit over (type, bucket) arms whose values track, by TD(0), what their
    questions teach: ``reward`` advantage (the group's mean |advantage|, SEC's choice) or learnability (4p(1 - p)
    of the group's success rate p). ``gate``: the difficulty part, whose unlocked levels bound the arms drawn."""

    def __init__(self, questions: list[QuestionRecord], params: SECParams, gate: Difficulty | None = None):
        _require_buckets(questions)
        self.params, self.gate = params, gate
        self.by_arm: dict[Arm, list[QuestionRecord]] = {}  # in input order, as Difficulty.by_bucket
        for q in questions:
            self.by_arm.setdefault((q.type, q.bucket), []).append(q)
        # Sorted by (type, bucket order) so the softmax and the metrics list arms in a stable order.
        self.arms: list[Arm] = sorted(self.by_arm, key=lambda a: (a[0], BUCKETS.index(a[1])))
        self.q_values: dict[Arm, float] = {arm: 0.0 for arm in self.arms}

    def open_arms(self) -> list[Arm]:
        """The arms SEC may draw: all of them, or with the difficulty part only those of unlocked levels."""
        if self.gate is None:
            return self.arms
        unlocked = self.gate.unlocked()
        return [a for a in self.arms if a[1] in unlocked]

    def select(self, rng: random.Random, n: int) -> list[QuestionRecord]:
        """``n`` questions, each from an arm drawn with probabilities ``softmax(Q / temperature)``."""
        arms = self.open_arms()
        probabilities = _softmax([self.q_values[a] for a in arms], self.params.temperature)
        drawn = rng.choices(arms, weights=probabilities, k=n)
        return [rng.choice(self.by_arm[arm]) for arm in drawn]

    def update(self, step: int, questions: list[QuestionRecord], success: list[float], advantage: list[float]) -> None:
        """TD(0) on each arm drawn this step: ``Q <- Q + alpha * (r - Q)``, r = the mean of its questions' rewards."""
        values = [4 * s * (1 - s) for s in success] if self.params.reward == "learnability" else advantage
        rewards: dict[Arm, list[float]] = {}
        for q, a in zip(questions, values):
            arm = (q.type, q.bucket)
            if arm not in self.q_values:
                raise ValueError(f"question {q.id!r} is of arm {_arm_name(arm)!r}, "
                                 "which is not among this curriculum's questions")
            rewards.setdefault(arm, []).append(float(a))
        for arm, arm_values in rewards.items():
            r = sum(arm_values) / len(arm_values)
            self.q_values[arm] += self.params.alpha * (r - self.q_values[arm])

    def metrics(self) -> dict[str, float]:
        return {f"curriculum/sec/{_arm_name(arm)}": self.q_values[arm] for arm in self.arms}

    def state(self) -> dict:
        # A list of [type, bucket, Q] rather than a dict: JSON object keys cannot be tuples.
        return {"q_values": [[t, b, q] for (t, b), q in self.q_values.items()]}

    def loader(self, state: dict) -> Commit:
        q_values = dict(self.q_values)
        for t, b, q in state["q_values"]:
            if (t, b) not in q_values:
                raise ValueError(f"state has a value for arm {_arm_name((t, b))!r}, "
                                 "which is not among this curriculum's questions")
            q_values[(t, b)] = float(q)

        def commit() -> None:
            self.q_values = q_values
        return commit


class CLPO(Part):
    """The ``clpo`` part: weighted draws over a pool that starts as the training questions and grows by verified
    rewrites (see the module docstring). ``seed`` seeds the rewrites; ``restructurer`` builds them (required
    when ``params`` turns restructuring or diversifying on)."""

    def __init__(self, questions: list[QuestionRecord], params: CLPOParams, seed: int,
                 restructurer: Restructurer | None):
        if (params.restructure or params.diversify) and restructurer is None:
            raise ValueError("clpo restructure or diversify is on, but no restructurer was given to build the rewrites")
        self.questions, self.params, self.seed, self.restructurer = questions, params, seed, restructurer
        self._reset()

    def _reset(self) -> None:
        """The state at the start of a run: the pool is the training questions, nothing classified yet."""
        self.pool: list[QuestionRecord] = list(self.questions)  # the training questions, then the rewrites added
        self.by_id: dict[str, QuestionRecord] = {q.id: q for q in self.pool}
        self.texts: set[str] = {normalize_answer(q.question) for q in self.pool}  # refuses duplicate rewrites
        # per question id: its last group success, its status (MASTERED, ...), the rewrites tried (each once)
        self.verdicts: dict[str, dict] = {}
        self.restructured: list[QuestionRecord] = []  # every rewrite tried, verified or not: restructured.jsonl's rows

    def select(self, rng: random.Random, n: int) -> list[QuestionRecord]:
        """``n`` questions of the pool, a mastered one with weight ``mastered_weight`` and any other with 1.

        When every question is mastered and that weight is 0 the draw is uniform: the run goes on rather than
        failing, on questions the policy has all solved.
        """
        weights = [self._weight(q) for q in self.pool]
        if not any(weights):
            weights = None
        return rng.choices(self.pool, weights=weights, k=n)

    def _weight(self, q: QuestionRecord) -> float:
        """A pool question's draw weight: ``mastered_weight`` once mastered, else 1."""
        verdict = self.verdicts.get(q.id)
        return self.params.mastered_weight if verdict and verdict["status"] == MASTERED else 1.0

    def update(self, step: int, questions: list[QuestionRecord], success: list[float], advantage: list[float]) -> None:
        """Classify each question by its mean group success this step, then rewrite the too-hard and in-reach ones.

        A question drawn twice in a step is judged on the mean of its groups. Questions are handled in the order
        they were drawn, so the rewrites join the pool in the same order in every process and every rerun.
        """
        results: dict[str, list[float]] = {}
        for q, s in zip(questions, success):
            if q.id not in self.by_id:
                raise ValueError(f"question {q.id!r} is not in this curriculum's pool")
            results.setdefault(q.id, []).append(float(s))
        for qid, values in results.items():
            s = sum(values) / len(values)
            verdict = self.verdicts.setdefault(qid, {"tried": []})
            verdict.update(success=s, status=self._classify(s))
        for qid in results:
            self._rewrite(step, self.by_id[qid], self.verdicts[qid])

    def _classify(self, success: float) -> str:
        """mastered, too hard or in reach, by the group success rate."""
        if success >= self.params.mastered_at:
            return MASTERED
        return TOO_HARD if success <= self.params.too_hard_at else IN_REACH

    def _rewrite(self, step: int, q: QuestionRecord, verdict: dict) -> None:
        """Try the rewrite the question's class calls for, once per question: easier for a too-hard multi-hop
        one, a rephrasing for one in reach (not for a rephrasing: that would only pile up wordings)."""
        if verdict["status"] == TOO_HARD and self.params.restructure and (present(q.hops) or 1) >= 2:
            kind = EASIER
        elif verdict["status"] == IN_REACH and self.params.diversify and q.restructure != REPHRASED:
            kind = REPHRASED
        else:
            return
        if kind in verdict["tried"]:
            return
        verdict["tried"].append(kind)
        seed = f"{self.seed}/{step}/{q.id}"
        make = self.restructurer.easier if kind == EASIER else self.restructurer.rephrase
        self._take(step, q, make(q, seed, self.texts))

    def _take(self, step: int, source: QuestionRecord, result: Restructured) -> None:
        """Log a rewrite and, when it verified, add it to the pool; a question that is no candidate (no chain of
        hops to rewrite) is left out of the log, which would otherwise fill with comparisons."""
        if result.reason in NO_CANDIDATE:
            return
        new = result.question
        self.restructured.append({"step": step, "source_id": source.id, "source_question": source.question,
                                  "id": new.id if new else None, "question": new.question if new else None,
                                  "answers": new.answers if new else None, "kind": result.kind,
                                  "verified": result.verified, "reason": result.reason})
        if result.verified:
            self._add(new)

    def _add(self, q: QuestionRecord) -> None:
        """Put a verified rewrite into the pool."""
        self.pool.append(q)
        self.by_id[q.id] = q
        self.texts.add(normalize_answer(q.question))

    def metrics(self) -> dict[str, float]:
        """Counts so far: questions now mastered and too hard, rewrites tried by kind, verified, pool size."""
        classes = [v["status"] for v in self.verdicts.values()]
        tried = [r["kind"] for r in self.restructured]
        return {"curriculum/clpo/mastered": float(classes.count(MASTERED)),
                "curriculum/clpo/too_hard": float(classes.count(TOO_HARD)),
                "curriculum/clpo/restructured": float(tried.count(EASIER)),
                "curriculum/clpo/rephrased": float(tried.count(REPHRASED)),
                "curriculum/clpo/verified": float(sum(r["verified"] for r in self.restructured)),
                "curriculum/clpo/pool": float(len(self.pool))}

    def state(self) -> dict:
        # a deep copy: later steps must not change a state already handed out
        return {"clpo": json.loads(json.dumps({"verdicts": self.verdicts,
                                               "added": [q.to_json() for q in self.pool[len(self.questions):]],
                                               "restructured": self.restructured}))}

    def loader(self, state: dict) -> Commit:
        """Check that the saved pool fits: every rewrite derives from a question before it and every verdict is on
        a question of the pool; restoring rebuilds the pool (the training questions, then the rewrites saved)."""
        if "clpo" not in state:
            raise ValueError("the state was saved without the clpo curriculum, which this one has; it cannot "
                             "continue that run")
        saved = json.loads(json.dumps(state["clpo"]))  # a copy: the caller's dict stays its own
        saved["added"] = [QuestionRecord.from_json(q) for q in saved["added"]]
        known = {q.id for q in self.questions}
        for q in saved["added"]:
            if q.derived_from not in known:
                raise ValueError(f"state adds {q.id!r}, derived from {q.derived_from!r}, which is not "
                                 "among this curriculum's questions")
            known.add(q.id)
        unknown = [qid for qid in saved["verdicts"] if qid not in known]
        if unknown:
            raise ValueError(f"state has verdicts on {unknown[:3]}, which are not among this curriculum's questions")

        def commit() -> None:
            self._reset()
            for q in saved["added"]:
                self._add(q)
            self.verdicts, self.restructured = saved["verdicts"], saved["restructured"]
        return commit


class NoiseSchedule:
    """The ``noise`` part: ZeroSearch's schedule over the run's ``total_steps`` (see :func:`noise_schedule`). It
    chooses no questions and learns nothing; it only gives each step's probability of a distractor."""

    def __init__(self, params: NoiseCurriculumParams, total_steps: int):
        self.params, self.total_steps = params, total_steps

    def probability(self, step: int) -> float:
        p = self.params
        return noise_schedule(step, self.total_steps, p.start, p.end, p.base)


# ---------------------------------------------------------------------------------------------------- the whole


class Curriculum:
    """Chooses each RL step's questions and retrieval noise, from the parts named in ``kinds``.

    ``questions``: the training questions (see the module docstring). ``kinds``: a subset of :data:`KINDS`;
    no choosing part is uniform sampling. ``seed`` and the step seed every draw. ``total_steps``: the run's
    length, which the noise schedule spans. Each part is configured by its section of ``rl`` (``rl.difficulty``,
    ``rl.sec``, ``rl.noise``, ``rl.clpo``; the schema's defaults when None), validated by the params schema
    whether or not that part is on, so a bad config fails at once; ``restructurer`` builds clpo's rewrites (required when clpo
    rewrites anything). ``shorthands``: single section fields by flat names (:data:`SHORTHANDS`: ``window``,
    ``sec_alpha``, ``noise_base``, ...), for tests and scripts; the rl stage uses :meth:`from_params`.

    Of the parts on, one chooses the questions (sec, else clpo, else difficulty, else :class:`Uniform`); all of
    them learn from each step's outcomes, add their metrics and keep their state.
    """

    def __init__(self, questions: list[QuestionRecord], kinds: Sequence[str], seed: int, total_steps: int, *,
                 rl: RLParams | None = None, restructurer: Restructurer | None = None, **shorthands):
        if not questions:
            raise ValueError("questions is empty: a curriculum needs at least one training question")
        if isinstance(kinds, str):  # "sec" would otherwise read as the kinds "s", "e", "c"
            raise ValueError(f"kinds must be a sequence of kind names, got the string {kinds!r}")
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown curriculum kind(s) {', '.join(map(repr, unknown))}; "
                             f"allowed: {', '.join(KINDS)}")
        clash = clpo_clash(kinds)
        if clash:
            raise ValueError(f"the clpo curriculum draws from its own pool and cannot be combined with "
                             f"{', '.join(clash)}; it combines only with noise")
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        for name in shorthands:
            if name not in SHORTHANDS:
                raise TypeError(f"Curriculum() got an unexpected keyword argument {name!r}")
        rl = rl or RLParams()  # the parts' sections: rl.difficulty, rl.sec, rl.noise, rl.clpo
        difficulty = _with_shorthands(rl.difficulty, "difficulty", shorthands)
        sec = _with_shorthands(rl.sec, "sec", shorthands)
        noise = _with_shorthands(rl.noise, "noise", shorthands)

        self.questions = list(questions)
        self.kinds = frozenset(kinds)
        self.seed, self.total_steps = seed, total_steps
        self.difficulty = Difficulty(self.questions, difficulty) if "difficulty" in self.kinds else None
        self.sec = SEC(self.questions, sec, gate=self.difficulty) if "sec" in self.kinds else None
        self.clpo = CLPO(self.questions, rl.clpo, seed, restructurer) if "clpo" in self.kinds else None
        self.noise = NoiseSchedule(noise, total_steps) if "noise" in self.kinds else None
        # in the order they learn, log and save: difficulty before sec, as SEC's arms follow the level
        self.parts: list[Part] = [p for p in (self.difficulty, self.sec, self.clpo) if p is not None]
        self.chooser = next((p for p in (self.sec, self.clpo, self.difficulty) if p is not None),
                            Uniform(self.questions))
        self.shares: dict[str, float] = {b: 0.0 for b in BUCKETS}

    @classmethod
    def from_params(cls, questions: list[QuestionRecord], rl: RLParams,
                    restructurer: Restructurer | None = None) -> Curriculum:
        """The curriculum of the rl stage: ``rl.curriculum``'s parts, each from its section of ``rl``, seeded by
        ``rl.seed`` over ``rl.steps`` steps."""
        return cls(questions, rl.curriculum, rl.seed, rl.steps, rl=rl, restructurer=restructurer)

    @property
    def level(self) -> int:
        """The difficulty part's current level (an index into :attr:`levels`); 0 without that part."""
        return self.difficulty.level if self.difficulty else 0

    @property
    def levels(self) -> list[str]:
        """The difficulty part's levels, the buckets present, easiest first; none without that part."""
        return self.difficulty.levels if self.difficulty else []

    @property
    def pool(self) -> list[QuestionRecord]:
        """The questions draws come from: the training questions, then clpo's verified rewrites."""
        return self.clpo.pool if self.clpo else self.questions

    @property
    def restructured(self) -> list[QuestionRecord]:
        """Every rewrite clpo tried, verified or not (``restructured.jsonl``'s rows); empty without clpo."""
        return self.clpo.restructured if self.clpo else []

    def select(self, step: int, n: int, draw: int = 0) -> list[QuestionRecord]:
        """The ``n`` questions of step ``step`` (0-based), drawn by the choosing part.

        ``draw`` > 0 draws that step again, independently (dynamic sampling's extra questions). Only the bucket
        shares (for :meth:`metrics`) are recorded; calling it twice for a step and draw gives the same questions.
        """
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        # A fresh generator per step: the draws cannot depend on how many numbers earlier steps consumed,
        # which is what makes a resumed run identical. A str seed is hashed with SHA-512, not hash(), so it
        # does not change with PYTHONHASHSEED.
        rng = random.Random(f"{self.seed}/{step}" + (f"/{draw}" if draw else ""))
        chosen = self.chooser.select(rng, n)
        self.shares = {b: (sum(q.bucket == b for q in chosen) / n if n else 0.0) for b in BUCKETS}
        return chosen

    def update(self, step: int, questions: list[QuestionRecord], success: list[float], advantage: list[float]) -> None:
        """Take in how step ``step``'s questions went: per question its group's mean success and mean |advantage|.

        ``success`` feeds the difficulty window and clpo's classes (and SEC's learnability), ``advantage`` the
        SEC arm values.
        """
        if not len(questions) == len(success) == len(advantage):
            raise ValueError(f"step {step}: {len(questions)} questions, {len(success)} success values and "
                             f"{len(advantage)} advantages must match one to one")
        for s in success:
            if not 0.0 <= s <= 1.0:
                raise ValueError(f"step {step}: success values are exact-match means in [0, 1], got {s}")
        for a in advantage:
            if not a >= 0:  # also catches NaN
                raise ValueError(f"step {step}: advantages must be mean absolute values (>= 0), got {a}")
        for part in self.parts:
            part.update(step, questions, success, advantage)

    def noise_probability(self, step: int) -> float:
        """The probability that a retrieved hit is replaced by a distractor at ``step``; 0 without the noise part."""
        return self.noise.probability(step) if self.noise else 0.0

    def metrics(self, step: int) -> dict[str, float]:
        """The flat floats to log at ``step``: level, noise probability, last selection's bucket shares, SEC values,
        clpo's counts."""
        out = {"curriculum/level": 0.0, "curriculum/noise_p": self.noise_probability(step)}
        for b in BUCKETS:
            out[f"curriculum/share/{b}"] = self.shares[b]
        for part in self.parts:
            out.update(part.metrics())  # the difficulty part's level replaces the 0 in place
        return out

    def state_dict(self) -> dict:
        """Everything that selection depends on beyond (seed, step), as JSON-serialisable values.

        Always ``level``, ``window``, ``q_values`` and ``shares`` (the first three at their start values without
        their part), and ``clpo`` with that part: the format every checkpoint's ``curriculum.json`` has.
        """
        state = {"level": 0, "window": [], "q_values": [], "shares": dict(self.shares)}
        for part in self.parts:
            state.update(part.state())
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` saved, checking first that it fits every part of this curriculum."""
        commits = [part.loader(state) for part in self.parts]
        shares = {b: float(state["shares"].get(b, 0.0)) for b in BUCKETS}
        for commit in commits:
            commit()
        self.shares = shares
