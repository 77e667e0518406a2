"""Curricula for the rl stage: which questions each optimizer step rolls out, and how noisy retrieval is.

At every step the trainer asks :meth:`Curriculum.select` for ``n`` training questions (dicts as the qa stage
writes them to ``train.jsonl``), rolls each out as a group, and reports back per question the group's mean
success (exact match, in [0, 1]) and mean absolute advantage with :meth:`Curriculum.update`. The curriculum
is built from named parts (``kinds``), any subset of:

* ``"difficulty"``: the difficulty buckets present among the questions (``features["bucket"]``, in
  :data:`searchlab.synth.generate.BUCKETS` order) are levels. Questions come from the current level, except
  that a share ``replay`` comes from an earlier level so the easy skills are not forgotten; the curriculum
  advances once the success over the last ``window`` current-level questions reaches ``advance_at``.
* ``"sec"``: the Self-Evolving Curriculum (Chen et al., "Self-Evolving Curriculum for LLM Reasoning",
  arXiv:2505.14970). Each (type, bucket) pair is an arm of a non-stationary bandit whose value tracks the
  mean absolute advantage its questions earn, i.e. how much the policy still learns from them (questions
  it always or never solves have advantage 0). Arms are drawn with Boltzmann probabilities and updated with
  TD(0). With ``"difficulty"`` as well, only the arms of unlocked levels can be drawn.
* ``"noise"``: ZeroSearch's noise schedule (Sun et al., "ZeroSearch: Incentivize the Search Capability of
  LLMs without Searching", arXiv:2505.04588): the probability that a retrieved document is replaced by a
  distractor rises from ``noise_start`` to ``noise_end`` along an exponential curve, so the agent first
  learns the protocol on clean results and then learns to cope with bad ones.
  :class:`~searchlab.rl.noisy.NoisyRetriever` applies it, with real passages of the corpus as the distractors.
* ``"clpo"``: CLPO's online curriculum (Zhang et al., "CLPO: Curriculum Learning meets Policy Optimization for
  LLM Reasoning", arXiv:2509.25004). After every step each question drawn is classified by its group's success
  rate: mastered (``>= mastered_at``: drawn with weight ``mastered_weight`` from then on, 0 drops it), too hard
  (``<= too_hard_at``) or in reach (between). A too-hard multi-hop question is restructured once into an easier
  one from its own evidence chain, an in-reach one diversified once with a rephrasing
  (:mod:`searchlab.rl.restructure`); a rewrite that passes the qa stage's checks joins the pool (with
  ``derived_from`` and ``restructure``), and every rewrite tried is logged in :attr:`Curriculum.restructured`
  (comparisons and oblique questions, which have no chain of hops, are left as they are).
  Draws are weighted over that pool; it replaces the difficulty and sec parts, so it combines only with noise.

No kinds at all is uniform sampling with replacement. Selection is a function of ``(seed, step, state)``
only: each step has its own ``random.Random`` seeded from ``"{seed}/{step}"``, so what earlier steps drew does
not matter, and :meth:`Curriculum.state_dict` is plain JSON, so a killed run resumes identically.

>>> qs = [{"id": "a", "type": "single", "features": {"bucket": "easy"}},
...       {"id": "b", "type": "bridge", "features": {"bucket": "hard"}}]
>>> c = Curriculum(qs, ["difficulty"], seed=0, total_steps=10, replay=0.0)
>>> [q["id"] for q in c.select(0, 3)]
['a', 'a', 'a']
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence

from searchlab.params import CLPOParams
from searchlab.rl.restructure import EASIER, NO_CANDIDATE, REPHRASED, Restructured, Restructurer
from searchlab.scoring import normalize_answer
from searchlab.synth.generate import BUCKETS

__all__ = ["KINDS", "Curriculum", "noise_schedule"]

KINDS = ("difficulty", "sec", "noise", "clpo")  # the composable parts a Curriculum can be built from
SEC_REWARDS = ("advantage", "learnability")  # what an SEC arm is rewarded by (see Curriculum)
MASTERED, IN_REACH, TOO_HARD = "mastered", "in_reach", "too_hard"  # clpo's classes of a question

Arm = tuple[str, str]  # (question type, difficulty bucket): one SEC bandit arm


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


def _check_clpo(kinds: Sequence[str], clpo: CLPOParams, restructurer: Restructurer | None) -> None:
    """Raise ``ValueError`` for a clpo part that cannot work: thresholds that overlap, another selecting part
    beside it, or rewrites asked for without a restructurer."""
    if clpo.too_hard_at >= clpo.mastered_at:
        raise ValueError(f"clpo too_hard_at ({clpo.too_hard_at}) must lie below mastered_at ({clpo.mastered_at})")
    if "clpo" not in kinds:
        return
    clash = sorted({"difficulty", "sec"} & set(kinds))
    if clash:
        raise ValueError(f"the clpo curriculum draws from its own pool and cannot be combined with "
                         f"{', '.join(clash)}; it combines only with noise")
    if (clpo.restructure or clpo.diversify) and restructurer is None:
        raise ValueError("clpo restructure or diversify is on, but no restructurer was given to build the rewrites")


def _check_clpo_state(questions: list[dict], state: dict) -> None:
    """Raise ``ValueError`` unless a saved clpo state fits ``questions``: every rewrite derives from a question
    before it and every verdict is on a question of the pool."""
    known = {q.get("id") for q in questions}
    for q in state["added"]:
        if q.get("derived_from") not in known:
            raise ValueError(f"state adds {q.get('id')!r}, derived from {q.get('derived_from')!r}, which is not "
                             "among this curriculum's questions")
        known.add(q.get("id"))
    unknown = [qid for qid in state["verdicts"] if qid not in known]
    if unknown:
        raise ValueError(f"state has verdicts on {unknown[:3]}, which are not among this curriculum's questions")


def _bucket(question: dict) -> str | None:
    """The difficulty bucket the qa stage recorded for ``question`` (``features["bucket"]``), if any."""
    return (question.get("features") or {}).get("bucket")


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


class Curriculum:
    """Chooses each RL step's questions and retrieval noise; composable parts chosen by name.

    ``questions``: the training questions (see the module docstring). ``kinds``: a subset of :data:`KINDS`;
    empty is uniform sampling. ``seed`` and the step seed every draw. ``total_steps``: the run's length, which
    the noise schedule spans. The keyword arguments belong to one part each and are validated whether or not
    that part is on, so a bad config fails at once rather than when someone turns the part on:

    * difficulty: ``advance_at`` (mean success over the window that unlocks the next level, in [0, 1]),
      ``window`` (how many current-level results the mean is over, >= 1), ``replay`` (the probability that a
      question is drawn from an earlier level instead, in [0, 1]);
    * sec: ``sec_alpha`` (TD(0) step size, in (0, 1]), ``sec_temperature`` (Boltzmann temperature, > 0),
      ``sec_reward`` (an arm's reward per question: ``advantage``, its group's mean |advantage|, or
      ``learnability``, 4p(1 - p) of its group's success rate p);
    * noise: ``noise_start``, ``noise_end`` (probabilities at the first and last step), ``noise_base`` (> 1;
      larger keeps the noise low for longer, then rises more steeply);
    * clpo: ``clpo`` (:class:`searchlab.params.CLPOParams`: the thresholds, the mastered weight, which rewrites
      are on), ``restructurer`` (the :class:`searchlab.rl.restructure.Restructurer` that builds them; required
      when clpo rewrites anything).
    """

    def __init__(self, questions: list[dict], kinds: Sequence[str], seed: int, total_steps: int, *,
                 advance_at: float = 0.6, window: int = 64, replay: float = 0.2,
                 sec_alpha: float = 0.5, sec_temperature: float = 1.0, sec_reward: str = "advantage",
                 noise_start: float = 0.0, noise_end: float = 0.5, noise_base: float = 2.0,
                 clpo: CLPOParams | None = None, restructurer: Restructurer | None = None):
        if not questions:
            raise ValueError("questions is empty: a curriculum needs at least one training question")
        if isinstance(kinds, str):  # "sec" would otherwise read as the kinds "s", "e", "c"
            raise ValueError(f"kinds must be a sequence of kind names, got the string {kinds!r}")
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown curriculum kind(s) {', '.join(map(repr, unknown))}; "
                             f"allowed: {', '.join(KINDS)}")
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        _check_probability("advance_at", advance_at)
        _check_probability("replay", replay)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if not 0.0 < sec_alpha <= 1.0:
            raise ValueError(f"sec_alpha must lie in (0, 1], got {sec_alpha}")
        if not sec_temperature > 0:
            raise ValueError(f"sec_temperature must be > 0, got {sec_temperature}")
        if sec_reward not in SEC_REWARDS:
            raise ValueError(f"sec_reward must be one of {', '.join(SEC_REWARDS)}, got {sec_reward!r}")
        noise_schedule(0, total_steps, noise_start, noise_end, noise_base)  # validates the noise parameters
        clpo = clpo or CLPOParams()
        _check_clpo(kinds, clpo, restructurer)

        self.questions = list(questions)
        self.kinds = frozenset(kinds)
        self.seed, self.total_steps = seed, total_steps
        self.advance_at, self.window, self.replay = advance_at, window, replay
        self.sec_alpha, self.sec_temperature, self.sec_reward = sec_alpha, sec_temperature, sec_reward
        self.noise_start, self.noise_end, self.noise_base = noise_start, noise_end, noise_base
        self.clpo, self.restructurer = clpo, restructurer

        if self.kinds & {"difficulty", "sec"}:
            # These parts sort questions by bucket; a question without one would silently never be drawn.
            for q in self.questions:
                if _bucket(q) not in BUCKETS:
                    raise ValueError(f"question {q.get('id')!r} has bucket {_bucket(q)!r}; the difficulty and "
                                     f"sec curricula need features['bucket'] in {BUCKETS}")
        # Grouped in input order, so the draws depend only on the question list, the seed and the step.
        self.by_bucket: dict[str, list[dict]] = {}
        self.by_arm: dict[Arm, list[dict]] = {}
        for q in self.questions:
            self.by_bucket.setdefault(_bucket(q), []).append(q)
            if "sec" in self.kinds:
                self.by_arm.setdefault((q["type"], _bucket(q)), []).append(q)
        self.levels = [b for b in BUCKETS if b in self.by_bucket]
        # Sorted by (type, bucket order) so the softmax and the metrics list arms in a stable order.
        self.arms: list[Arm] = sorted(self.by_arm, key=lambda a: (a[0], BUCKETS.index(a[1])))

        self.level = 0
        self.recent: list[float] = []  # the sliding window of current-level successes
        self.q_values: dict[Arm, float] = {arm: 0.0 for arm in self.arms}
        self.shares: dict[str, float] = {b: 0.0 for b in BUCKETS}
        self._reset_clpo()

    def _reset_clpo(self) -> None:
        """clpo's state at the start of a run: the pool is the training questions, nothing classified yet."""
        self.pool: list[dict] = list(self.questions)  # the training questions, then the rewrites in order of adding
        self.by_id: dict[str, dict] = {q.get("id"): q for q in self.pool}
        self.texts: set[str] = {normalize_answer(q.get("question")) for q in self.pool}  # refuses duplicate rewrites
        # per question id: its last group success, its status (MASTERED, ...), the rewrites tried (each once)
        self.verdicts: dict[str, dict] = {}
        self.restructured: list[dict] = []  # every rewrite tried, verified or not: restructured.jsonl's rows

    # ------------------------------------------------------------------ selection

    def select(self, step: int, n: int, draw: int = 0) -> list[dict]:
        """The ``n`` questions of step ``step`` (0-based), drawn with replacement by the active parts.

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
        if "sec" in self.kinds:
            chosen = self._select_sec(rng, n)
        elif "clpo" in self.kinds:
            chosen = self._select_clpo(rng, n)
        elif "difficulty" in self.kinds:
            chosen = [self._draw_level(rng) for _ in range(n)]
        else:
            chosen = [rng.choice(self.questions) for _ in range(n)]
        self.shares = {b: (sum(_bucket(q) == b for q in chosen) / n if n else 0.0) for b in BUCKETS}
        return chosen

    def _draw_level(self, rng: random.Random) -> dict:
        """One question of the current level, or with probability ``replay`` of a uniformly chosen earlier one."""
        bucket = self.levels[self.level]
        if self.level > 0 and self.replay > 0 and rng.random() < self.replay:
            bucket = self.levels[rng.randrange(self.level)]
        return rng.choice(self.by_bucket[bucket])

    def _open_arms(self) -> list[Arm]:
        """The arms SEC may draw: all of them, or with the difficulty part only those of unlocked levels."""
        if "difficulty" not in self.kinds:
            return self.arms
        unlocked = set(self.levels[:self.level + 1])
        return [a for a in self.arms if a[1] in unlocked]

    def _select_sec(self, rng: random.Random, n: int) -> list[dict]:
        """``n`` questions, each from an arm drawn with probabilities ``softmax(Q / sec_temperature)``."""
        arms = self._open_arms()
        probabilities = _softmax([self.q_values[a] for a in arms], self.sec_temperature)
        drawn = rng.choices(arms, weights=probabilities, k=n)
        return [rng.choice(self.by_arm[arm]) for arm in drawn]

    def _select_clpo(self, rng: random.Random, n: int) -> list[dict]:
        """``n`` questions of the pool, a mastered one with weight ``mastered_weight`` and any other with 1.

        When every question is mastered and that weight is 0 the draw is uniform: the run goes on rather than
        failing, on questions the policy has all solved.
        """
        weights = [self._weight(q) for q in self.pool]
        if not any(weights):
            weights = None
        return rng.choices(self.pool, weights=weights, k=n)

    def _weight(self, q: dict) -> float:
        """A pool question's draw weight: ``mastered_weight`` once mastered, else 1."""
        verdict = self.verdicts.get(q["id"])
        return self.clpo.mastered_weight if verdict and verdict["status"] == MASTERED else 1.0

    # ------------------------------------------------------------------ feedback

    def update(self, step: int, questions: list[dict], success: list[float], advantage: list[float]) -> None:
        """Take in how step ``step``'s questions went: per question its group's mean success and mean |advantage|.

        ``success`` feeds the difficulty window (only questions of the current level count: replayed easy
        questions say nothing about the current level), ``advantage`` the SEC arm values.
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
        if "difficulty" in self.kinds:
            self._update_level(questions, success)
        if "sec" in self.kinds:
            learnability = [4 * s * (1 - s) for s in success]
            self._update_sec(questions, learnability if self.sec_reward == "learnability" else advantage)
        if "clpo" in self.kinds:
            self._update_clpo(step, questions, success)

    def _update_level(self, questions: list[dict], success: list[float]) -> None:
        """Slide the current level's successes into the window; advance when it is full and good enough."""
        for q, s in zip(questions, success):
            if _bucket(q) != self.levels[self.level]:
                continue
            self.recent.append(float(s))
            del self.recent[:-self.window]
            last = self.level == len(self.levels) - 1
            if not last and len(self.recent) == self.window and sum(self.recent) / self.window >= self.advance_at:
                self.level += 1
                self.recent = []  # the next level is judged on its own results only

    def _update_sec(self, questions: list[dict], values: list[float]) -> None:
        """TD(0) on each arm drawn this step: ``Q <- Q + alpha * (r - Q)``, r = the mean of its questions' values."""
        rewards: dict[Arm, list[float]] = {}
        for q, a in zip(questions, values):
            arm = (q["type"], _bucket(q))
            if arm not in self.q_values:
                raise ValueError(f"question {q.get('id')!r} is of arm {_arm_name(arm)!r}, "
                                 "which is not among this curriculum's questions")
            rewards.setdefault(arm, []).append(float(a))
        for arm, values in rewards.items():
            r = sum(values) / len(values)
            self.q_values[arm] += self.sec_alpha * (r - self.q_values[arm])

    def _update_clpo(self, step: int, questions: list[dict], success: list[float]) -> None:
        """Classify each question by its mean group success this step, then rewrite the too-hard and in-reach ones.

        A question drawn twice in a step is judged on the mean of its groups. Questions are handled in the order
        they were drawn, so the rewrites join the pool in the same order in every process and every rerun.
        """
        results: dict[str, list[float]] = {}
        for q, s in zip(questions, success):
            if q["id"] not in self.by_id:
                raise ValueError(f"question {q['id']!r} is not in this curriculum's pool")
            results.setdefault(q["id"], []).append(float(s))
        for qid, values in results.items():
            s = sum(values) / len(values)
            verdict = self.verdicts.setdefault(qid, {"tried": []})
            verdict.update(success=s, status=self._classify(s))
        for qid in results:
            self._rewrite(step, self.by_id[qid], self.verdicts[qid])

    def _classify(self, success: float) -> str:
        """mastered, too hard or in reach, by the group success rate."""
        if success >= self.clpo.mastered_at:
            return MASTERED
        return TOO_HARD if success <= self.clpo.too_hard_at else IN_REACH

    def _rewrite(self, step: int, q: dict, verdict: dict) -> None:
        """Try the rewrite the question's class calls for, once per question: easier for a too-hard multi-hop
        one, a rephrasing for one in reach (not for a rephrasing: that would only pile up wordings)."""
        if verdict["status"] == TOO_HARD and self.clpo.restructure and q.get("hops", 1) >= 2:
            kind = EASIER
        elif verdict["status"] == IN_REACH and self.clpo.diversify and q.get("restructure") != REPHRASED:
            kind = REPHRASED
        else:
            return
        if kind in verdict["tried"]:
            return
        verdict["tried"].append(kind)
        seed = f"{self.seed}/{step}/{q['id']}"
        make = self.restructurer.easier if kind == EASIER else self.restructurer.rephrase
        self._take(step, q, make(q, seed, self.texts))

    def _take(self, step: int, source: dict, result: Restructured) -> None:
        """Log a rewrite and, when it verified, add it to the pool; a question that is no candidate (no chain of
        hops to rewrite) is left out of the log, which would otherwise fill with comparisons."""
        if result.reason in NO_CANDIDATE:
            return
        new = result.question
        self.restructured.append({"step": step, "source_id": source["id"], "source_question": source["question"],
                                  "id": new["id"] if new else None, "question": new["question"] if new else None,
                                  "answers": new["answers"] if new else None, "kind": result.kind,
                                  "verified": result.verified, "reason": result.reason})
        if result.verified:
            self._add(new)

    def _add(self, q: dict) -> None:
        """Put a verified rewrite into the pool."""
        self.pool.append(q)
        self.by_id[q["id"]] = q
        self.texts.add(normalize_answer(q["question"]))

    # ------------------------------------------------------------------ noise, logging, resuming

    def noise_probability(self, step: int) -> float:
        """The probability that a retrieved hit is replaced by a distractor at ``step``; 0 without the noise part."""
        if "noise" not in self.kinds:
            return 0.0
        return noise_schedule(step, self.total_steps, self.noise_start, self.noise_end, self.noise_base)

    def metrics(self, step: int) -> dict[str, float]:
        """The flat floats to log at ``step``: level, noise probability, last selection's bucket shares, SEC values."""
        out = {"curriculum/level": float(self.level if "difficulty" in self.kinds else 0),
               "curriculum/noise_p": self.noise_probability(step)}
        for b in BUCKETS:
            out[f"curriculum/share/{b}"] = self.shares[b]
        for arm in self.arms:
            out[f"curriculum/sec/{_arm_name(arm)}"] = self.q_values[arm]
        if "clpo" in self.kinds:
            out.update(self._clpo_metrics())
        return out

    def _clpo_metrics(self) -> dict[str, float]:
        """clpo's counts so far: questions now mastered and too hard, rewrites tried by kind, verified, pool size."""
        classes = [v["status"] for v in self.verdicts.values()]
        tried = [r["kind"] for r in self.restructured]
        return {"curriculum/clpo/mastered": float(classes.count(MASTERED)),
                "curriculum/clpo/too_hard": float(classes.count(TOO_HARD)),
                "curriculum/clpo/restructured": float(tried.count(EASIER)),
                "curriculum/clpo/rephrased": float(tried.count(REPHRASED)),
                "curriculum/clpo/verified": float(sum(r["verified"] for r in self.restructured)),
                "curriculum/clpo/pool": float(len(self.pool))}

    def state_dict(self) -> dict:
        """Everything that selection depends on beyond (seed, step), as JSON-serialisable values."""
        state = {"level": self.level,
                 "window": list(self.recent),
                 # A list of [type, bucket, Q] rather than a dict: JSON object keys cannot be tuples.
                 "q_values": [[t, b, q] for (t, b), q in self.q_values.items()],
                 "shares": dict(self.shares)}
        if "clpo" in self.kinds:
            # a deep copy: later steps must not change a state already handed out
            state["clpo"] = json.loads(json.dumps({"verdicts": self.verdicts, "added": self.pool[len(self.questions):],
                                                   "restructured": self.restructured}))
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` saved, checking it fits this curriculum's questions."""
        level = int(state["level"])
        if not 0 <= level < len(self.levels):
            raise ValueError(f"state level {level} is out of range for the {len(self.levels)} level(s) "
                             f"{self.levels}")
        q_values = dict(self.q_values)
        for t, b, q in state["q_values"]:
            if (t, b) not in q_values:
                raise ValueError(f"state has a value for arm {_arm_name((t, b))!r}, "
                                 "which is not among this curriculum's questions")
            q_values[(t, b)] = float(q)
        if "clpo" in self.kinds:
            if "clpo" not in state:
                raise ValueError("the state was saved without the clpo curriculum, which this one has; it cannot "
                                 "continue that run")
            _check_clpo_state(self.questions, state["clpo"])
        self.level = level
        self.recent = [float(s) for s in state["window"]][-self.window:]
        self.q_values = q_values
        self.shares = {b: float(state["shares"].get(b, 0.0)) for b in BUCKETS}
        if "clpo" in self.kinds:
            self._load_clpo(json.loads(json.dumps(state["clpo"])))  # a copy: the caller's dict stays its own

    def _load_clpo(self, state: dict) -> None:
        """Restore clpo's pool (the training questions, then the rewrites saved), verdicts and log."""
        self._reset_clpo()
        for q in state["added"]:
            self._add(q)
        self.verdicts = state["verdicts"]
        self.restructured = state["restructured"]
