"""Reverse question construction (BMGQ): from a target entity and its evidence cluster to a verified question.

Every builder starts at a target entity, walks facts that the KB ties to
passages, and returns a :class:`Question` whose answer is provably unique:

- ``single``  (NQ-like): one fact of a named entity;
- ``bridge``  (HotpotQA-like): a named entity → a bridge entity → the answer;
- ``compose`` (MuSiQue-like): a chain of three or four hops, phrased as nested noun phrases;
- ``compare`` (2Wiki-like): which of two named entities has the larger/smaller value;
- ``oblique`` (BrowseComp-like): a conjunction of under-informative cues about the target, each
  matching several entities while only the target matches all (checked with exact KB queries).

A builder returns ``None`` after recording why it could not build (``reasons``),
so the stage can count rejections by reason.

Boolean facts (a record's ``"landlocked": false``) serve as oblique cues in words
("that is not landlocked"); they answer a question ("Is Aruba landlocked?" → "no")
only with ``yes_no``, off by default since a guesser gets half of such questions right.
Year cues name a decade ("the 1960s"; "1900-1909" for a decade ending in 00, never
"the 1900s", which reads as a century) or a century; a century cue counts both
readings of its boundary years (1900 to 2000 for "the 20th century") and is never
used for a year ending in 00.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from searchlab.corpus.kb import KB, Entity, Fact
from searchlab.corpus.records import boolean_question, is_year
from searchlab.questions.record import QuestionRecord
from searchlab.scoring import normalize_answer
from searchlab.synth.lexicon import (
    STYLE,
    Phrasing,
    article,
    fact_label,
    fix_articles,
    is_person,
    phrasing,
    type_noun,
    words,
)


@dataclass
class Constraint:
    """One condition the answer satisfies, with the fact and passage that satisfy it."""

    text: str  # the cue or hop as the question words it
    predicate: str
    op: str  # "hop" (a chain step), "eq", "range", "via" (through a described entity), "compare"
    subject: str  # entity the fact is about
    value: str | int | float | None
    passage: str  # the passage stating the fact
    label: str  # logical relation: temporal, spatial, membership, ...
    matches: int | None = None  # oblique cues: how many entities of the answer's type satisfy the cue alone
    low: float | None = None
    high: float | None = None
    via: dict | None = None  # "via": the intermediate condition {predicate, value, subject, passage, value_text}
    value_text: str = ""  # how the passage states the value (a name, "1,234")


@dataclass
class Question:
    """A verified question with its answer, evidence and the structure filters and demonstrations need."""

    id: str
    type: str
    question: str
    answers: list[str]
    answer_entity: str | None
    slot: dict  # what is asked: {"predicate": p} (a hop's value) or {"type": t} (an entity of that type)
    hops: int
    constraints: list[Constraint]
    evidence: list[str]  # passage ids, in reasoning order
    mentions: list[str]  # entity ids the question names
    compare: dict | None = None  # {"predicate", "direction": "max"|"min", "options": [id, id]}
    features: dict = field(default_factory=dict)

    def to_record(self) -> QuestionRecord:
        """The question as the qa stage stores it (its constraints as JSON objects)."""
        return QuestionRecord(**asdict(self))

    def to_json(self) -> dict:
        """The stored line: ``to_record().to_json()``."""
        return self.to_record().to_json()


class Builder:
    """Builds questions of every type over one :class:`KB` with one ``random.Random``."""

    def __init__(self, kb: KB, rng: random.Random, min_cue_matches: int = 2, max_cues: int = 4,
                 yes_no: bool = False):
        self.kb, self.rng = kb, rng
        self.min_cue_matches, self.max_cues = min_cue_matches, max_cues
        self.yes_no = yes_no  # boolean facts may be asked ("Is Aruba landlocked?"); off: they are only cues
        self.reasons: Counter[str] = Counter()

    def build(self, kind: str, target: str, qid: str) -> Question | None:
        builders: dict[str, Callable[[Entity, str], Question | None]] = {
            "single": self.single, "bridge": self.bridge, "compose": self.compose,
            "compare": self.compare, "oblique": self.oblique}
        return builders[kind](self.kb[target], qid)

    def _fail(self, reason: str) -> None:
        self.reasons[reason] += 1
        return None

    def pick(self, options):
        return options[int(self.rng.random() * len(options))]

    # ------------------------------------------------------------------ chains
    def _functional(self, e: Entity, relation: bool | None = None, asked: bool = False) -> list[Fact]:
        """Facts of ``e`` with one value each (so a chain step has one answer); ``asked``: phrasable as a question."""
        out = []
        for p in e.facts:
            f = e.one(p)
            if f is None or (relation is not None and f.relation != relation):
                continue
            if asked and f.boolean and not self.yes_no:
                continue  # a yes/no answer: a guesser gets half of them
            ph = phrasing(p, f.numeric)
            if (asked and not ph.questions) or (relation and not ph.phrases):
                continue
            if f.relation and not self.kb.unique_name(f.value):
                continue  # an answer or bridge must be nameable without ambiguity
            out.append(f)
        return out

    def _walk(self, start: Entity, steps: int) -> list[Fact] | None:
        """A chain of ``steps`` relation facts from ``start``, never revisiting an entity."""
        seen, chain, here = {start.id}, [], start
        for _ in range(steps):
            options = [f for f in self._functional(here, relation=True) if f.value not in seen]
            if not options:
                return None
            f = self.pick(options)
            chain.append(f)
            seen.add(f.value)
            here = self.kb[f.value]
        return chain

    def _chain_question(self, kind: str, start: Entity, qid: str, bridges: int) -> Question | None:
        if not self.kb.unique_name(start.id):
            return self._fail("ambiguous_name")
        chain = self._walk(start, bridges) if bridges else []
        if chain is None:
            return self._fail("no_chain")
        end = self.kb[chain[-1].value] if chain else start
        seen = {start.id, *(f.value for f in chain)}
        final = [f for f in self._functional(end, asked=True) if not (f.relation and f.value in seen)]
        if not final:
            return self._fail("no_final_fact")
        last = self.pick(final)
        subject = start.name
        for f in chain:
            phrase = self.pick(phrasing(f.predicate).phrases)
            t = self._type_noun(self.kb[f.value]) if "{t}" in phrase else ""
            subject = phrase.format(s=subject, t=t)
        if last.boolean:
            text = _sentence_case(boolean_question(last.predicate).format(s=subject))
        else:
            template = self.pick(phrasing(last.predicate, last.numeric).questions)
            what = self._what(last) if "{what}" in template else ""
            text = _sentence_case(template.format(s=subject, what=what))
        facts = [*chain, last]
        answers = _answers(self.kb, last)
        if not last.boolean and any(normalize_answer(a) and normalize_answer(a) in normalize_answer(text)
                                    for a in answers):
            return self._fail("answer_in_question")
        constraints = [Constraint(text=_hop_text(self.kb, f), predicate=f.predicate, op="hop", subject=f.subject,
                                  value=f.value, passage=f.passage, label=fact_label(f),
                                  value_text=self.kb.value_text(f)) for f in facts]
        slot = {"predicate": last.predicate, **({"type": self.kb[last.value].type} if last.relation else {}),
                **({"yes_no": True} if last.boolean else {})}
        return Question(id=qid, type=kind, question=text, answers=answers,
                        answer_entity=last.value if last.relation else None, slot=slot, hops=len(facts),
                        constraints=constraints, evidence=_unique([f.passage for f in facts]), mentions=[start.id])

    def single(self, target: Entity, qid: str) -> Question | None:
        return self._chain_question("single", target, qid, 0)

    def bridge(self, target: Entity, qid: str) -> Question | None:
        return self._chain_question("bridge", target, qid, 1)

    def compose(self, target: Entity, qid: str) -> Question | None:
        return self._chain_question("compose", target, qid, 2 if self.rng.random() < 0.6 else 3)

    def _person(self, e: Entity) -> bool:
        return is_person(e.type, e.facts)

    def _type_noun(self, e: Entity) -> str:
        return type_noun(e.type, e.subtype, self.pick)

    def _what(self, f: Fact) -> str:
        """How a question asks for the fact's value: "Who" (a person), "Which city", or "What"."""
        if not f.relation:
            return "What"
        e = self.kb[f.value]
        if self._person(e):
            return "Who"
        noun = self._type_noun(e)
        return "What" if noun in words(f.predicate).split() else f"Which {noun}"

    # ------------------------------------------------------------------ comparison
    def compare(self, target: Entity, qid: str) -> Question | None:
        """Which of two entities of one type has the larger (or smaller) value; the other shares a value with it
        where possible (same birthplace, same country), which makes the pair natural and the search harder."""
        if not self.kb.unique_name(target.id):
            return self._fail("ambiguous_name")
        options = [f for f in self._functional(target, relation=False)
                   if f.numeric and (phrasing(f.predicate, True).compare_max or phrasing(f.predicate, True).compare_min)]
        if not options:
            return self._fail("no_comparable_fact")
        fact = self.pick(options)
        rival = self._rival(target, fact)
        if rival is None:
            return self._fail("no_rival")
        other = rival.one(fact.predicate)
        ph = phrasing(fact.predicate, True)
        directions = [d for d, t in (("max", ph.compare_max), ("min", ph.compare_min)) if t]
        direction = self.pick(directions)
        winner, loser = (target, rival) if (fact.value > other.value) == (direction == "max") else (rival, target)
        a, b = (target, rival) if self.rng.random() < 0.5 else (rival, target)
        templates = ph.compare_max if direction == "max" else ph.compare_min
        text = self.pick(templates).format(a=a.name, b=b.name)
        if self._person(target) and text.startswith(("Which was ", "Which has ")):
            text = "Who" + text[len("Which"):]  # "Who was born earlier, ...?"
        constraints = [Constraint(text=_hop_text(self.kb, f), predicate=f.predicate, op="compare", subject=f.subject,
                                  value=f.value, passage=f.passage, label=fact_label(f),
                                  value_text=self.kb.value_text(f)) for f in (fact, other)]
        return Question(id=qid, type="compare", question=text, answers=[winner.name], answer_entity=winner.id,
                        slot={"type": target.type}, hops=2, constraints=constraints,
                        evidence=_unique([fact.passage, other.passage]), mentions=[a.id, b.id],
                        compare={"predicate": fact.predicate, "direction": direction, "options": [a.id, b.id]})

    def _rival(self, target: Entity, fact: Fact) -> Entity | None:
        related = [f for f in self._functional(target, relation=True)]
        self.rng.shuffle(related)
        pools = [self.kb.matching(f.predicate, f.value) for f in related[:2]]
        pools.append(self.kb.by_type[target.type])
        for pool in pools:
            for _ in range(8):
                other = self.kb[self.pick(pool)]
                g = other.one(fact.predicate)
                if (other.id != target.id and other.type == target.type and g is not None and g.numeric
                        and g.value != fact.value and self.kb.unique_name(other.id)):
                    return other
        return None

    # ------------------------------------------------------------------ oblique
    def oblique(self, target: Entity, qid: str) -> Question | None:
        """Cues that each match at least ``min_cue_matches`` entities of the target's type and together only it.

        The most selective cue seeds the candidate set (a lookup, so the work per
        question does not grow with the KB); further cues, preferring new labels
        and new passages, are added while they cut candidates, until one is left.
        """
        cues = [c for c in self._cues(target) if c.count >= self.min_cue_matches]
        if len(cues) < 2:
            return self._fail("too_few_cues")
        seed = min(cues, key=lambda c: (c.count, self.rng.random()))
        candidates = [e for e in set(seed.members()) if self.kb[e].type == target.type]
        chosen = [seed]
        rest = [c for c in cues if c is not seed]
        self.rng.shuffle(rest)
        while len(candidates) > 1 and len(chosen) < self.max_cues and rest:
            labels = {c.constraint.label for c in chosen}
            passages = {c.constraint.passage for c in chosen}
            rest.sort(key=lambda c: (c.constraint.label in labels) + (c.constraint.passage in passages))
            for i, cue in enumerate(rest):
                kept = [e for e in candidates if cue.holds(self.kb[e])]
                if len(kept) < len(candidates):
                    chosen.append(rest.pop(i))
                    candidates = kept
                    break
            else:
                break
        if candidates != [target.id]:
            return self._fail("oblique_not_unique")
        self.rng.shuffle(chosen)
        noun = type_noun(target.type, target.subtype, self.pick)
        desc = _join([c.phrase for c in chosen])
        frames = STYLE.person_oblique_frames if self._person(target) else STYLE.oblique_frames
        text = self.pick(frames).format(noun=noun, desc=desc, desc_a=article(f"{noun} {desc}"))
        answers = [target.name]
        if normalize_answer(target.name) in normalize_answer(text):
            return self._fail("answer_in_question")
        constraints = [c.constraint for c in chosen]
        evidence = _unique([p for c in chosen for p in c.passages])
        mentions = _unique([m for c in chosen for m in c.mentions])
        return Question(id=qid, type="oblique", question=_sentence_case(text), answers=answers,
                        answer_entity=target.id, slot={"type": target.type}, hops=1 + any(c.constraint.op == "via"
                                                                                            for c in chosen),
                        constraints=constraints, evidence=evidence, mentions=mentions)

    def _cues(self, target: Entity) -> list["_Cue"]:
        """Every cue the target's facts offer: categorical values, year spans, thresholds, related entities
        (named, or described by one of their own facts)."""
        kb, cues = self.kb, []
        rel = "who" if self._person(target) else "that"
        for p, facts in target.facts.items():
            for f in facts:
                if f.boolean:  # "that is not landlocked"
                    cues.append(_Cue(kb, target.type, f, f"{rel} {f.text}", "eq"))
                    continue
                ph = phrasing(p, f.numeric)
                if f.numeric and ph.year and ph.cues:
                    cues.append(self._year_cue(target, f, ph, rel))
                elif f.numeric and (ph.more or ph.less):
                    cues.append(self._threshold_cue(target, f, ph))
                elif not f.relation and ph.cues:
                    cues.append(_Cue(kb, target.type, f, fix_articles(self.pick(ph.cues).format(v=f.text, rel=rel)),
                                     "eq"))
                elif f.relation and ph.cues and kb.unique_name(f.value):
                    cues.append(_Cue(kb, target.type, f, self.pick(ph.cues).format(v=kb[f.value].name, rel=rel),
                                     "eq"))
                    via = self._via_cue(target, f, ph, rel)
                    if via is not None:
                        cues.append(via)
        return [c for c in cues if c is not None]

    def _year_cue(self, target: Entity, f: Fact, ph: Phrasing, rel: str = "that") -> "_Cue | None":
        """A decade ("the 1960s", "1900-1909") or, 4 times in 10, a century ("the 20th century") around the year.

        "The 1900s" would read as the century, so a decade ending in 00 is named by its years; a year ending in
        00 gets no century cue (1900 is in the 19th century to some readers, the 20th to others), and a century
        cue matches both readings of its boundaries ([1900, 2000] for the 20th), so no reader finds a second answer.
        """
        decade = self.rng.random() < 0.6
        value = f.value
        year = int(value) if isinstance(value, int) or (isinstance(value, float) and value.is_integer()) else None
        if not is_year(year):
            return None
        if year % 100 == 0:
            decade = True
        if year < 1000:  # "the 610s" is no way to say it
            if decade:
                return None
            decade = False
        if decade:
            low = year - year % 10
            high, span = low + 10, (f"{low}-{low + 9}" if low % 100 == 0 else f"the {low}s")
        else:
            low = year - year % 100
            high, span = low + 101, f"the {_ordinal(low // 100 + 1)} century"
        return _Cue(self.kb, target.type, f, fix_articles(self.pick(ph.cues).format(v=span, rel=rel)), "range",
                    low, high)

    def _threshold_cue(self, target: Entity, f: Fact, ph: Phrasing) -> "_Cue | None":
        value = float(f.value)
        more = bool(ph.more) and (not ph.less or self.rng.random() < 0.6)
        bound = _round_bound(value, down=more)
        if bound is None or (more and bound >= value) or (not more and bound <= value):
            return None
        text = self.pick(ph.more if more else ph.less).format(v=f"{int(bound):,}")
        low, high = (bound + 1e-9, None) if more else (None, bound)
        return _Cue(self.kb, target.type, f, text, "range", low, high)

    def _via_cue(self, target: Entity, f: Fact, ph: Phrasing, rel: str = "that") -> "_Cue | None":
        """``born in a city located in Foria``: the related entity described by one of its own facts."""
        kb, hub = self.kb, self.kb[f.value]
        options = []
        for g in self._functional(hub):
            gph = phrasing(g.predicate, g.numeric)
            if g.boolean:  # "born in a city that is coastal"
                options.append((g, gph))
                continue
            if g.numeric or not gph.cues or g.value == target.id or (g.relation and not kb.unique_name(g.value)):
                continue
            options.append((g, gph))
        if not options:
            return None
        g, gph = self.pick(options)
        hub_rel = "who" if self._person(hub) else "that"
        inner = f"{hub_rel} {g.text}" if g.boolean else self.pick(gph.cues).format(v=kb.value_text(g), rel=hub_rel)
        hub_noun = article(f"{type_noun(hub.type, hub.subtype, self.pick)} {inner}")
        return _Cue(kb, target.type, f, self.pick(ph.cues).format(v=hub_noun, rel=rel), "via", via=g)


COUNT_CAP = 50  # a cue's recorded match count saturates here ("matches at least 50")


class _Cue:
    """An oblique cue: its phrase, its constraint, and how to test and enumerate the entities it matches."""

    def __init__(self, kb: KB, type_: str, fact: Fact, phrase: str, op: str,
                 low: float | None = None, high: float | None = None, via: Fact | None = None):
        self.kb, self.type, self.fact, self.phrase, self.op = kb, type_, fact, phrase, op
        self.low, self.high, self.via = low, high, via
        if via is not None:  # the hubs: every entity the inner condition describes
            self.hubs = set(kb.matching(via.predicate, via.value))
        self.count = self._count()
        self.constraint = Constraint(
            text=phrase, predicate=fact.predicate, op=op, subject=fact.subject, value=fact.value,
            passage=fact.passage, label=fact_label(fact), matches=self.count, low=low, high=high,
            value_text=kb.value_text(fact),
            via=None if via is None else {"predicate": via.predicate, "value": via.value, "subject": via.subject,
                                           "passage": via.passage, "value_text": kb.value_text(via)})

    @property
    def passages(self) -> list[str]:
        return [self.fact.passage] + ([self.via.passage] if self.via is not None else [])

    @property
    def mentions(self) -> list[str]:
        if self.via is not None:
            return [self.via.value] if self.via.relation else []
        return [self.fact.value] if self.fact.relation else []

    def members(self) -> list[str]:
        """Every entity (of any type) the cue alone matches; used only for the seed, the most selective cue."""
        return list(self._stream())

    def holds(self, e: Entity) -> bool:
        for f in e.facts.get(self.fact.predicate, ()):
            if self.op == "eq" and f.value == self.fact.value:
                return True
            if self.op == "range" and f.numeric and (self.low is None or f.value >= self.low) and (
                    self.high is None or f.value < self.high):
                return True
            if self.op == "via" and f.value in self.hubs:
                return True
        return False

    def _count(self) -> int:
        """Entities of the target's type the cue alone matches, counted up to :data:`COUNT_CAP`.

        Stopping there keeps the work per question constant as the KB grows (a
        cue matching 50 entities is broad enough); an exact count would grow with it.
        """
        n = 0
        for e in self._stream():
            if self.kb[e].type == self.type:
                n += 1
                if n >= COUNT_CAP:
                    break
        return n

    def _stream(self):
        kb, p = self.kb, self.fact.predicate
        if self.op == "range":
            start, stop = kb.range_bounds(p, self.low, self.high)
            for i in range(start, stop):
                yield kb.numeric[p][i][1]
        elif self.op == "via":
            for hub in self.hubs:
                yield from kb.matching(p, hub)
        else:
            yield from kb.matching(p, self.fact.value)


# ---------------------------------------------------------------------- helpers
def _answers(kb: KB, fact: Fact) -> list[str]:
    """Gold answers for a fact's value: the name or the passage's text, plus the plain number when it differs;
    "yes" or "no" for a boolean."""
    answers = [kb.answer_text(fact)]
    if fact.numeric and str(fact.value) != fact.text:
        answers.append(str(fact.value))
    return answers


def _hop_text(kb: KB, f: Fact) -> str:
    if f.boolean:
        return f"{kb[f.subject].name} {f.text}."
    ph = phrasing(f.predicate, f.numeric)
    template = ph.statements[0] if ph.statements else "{s}: {v}."
    return fix_articles(template.format(s=kb[f.subject].name, v=kb.value_text(f)))


def _unique(items):
    return list(dict.fromkeys(items))


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _sentence_case(text: str) -> str:
    text = fix_articles(text)
    return text[:1].upper() + text[1:]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _round_bound(value: float, down: bool) -> float | None:
    """A round threshold near ``value`` (one or two significant digits), below it if ``down`` else above."""
    if value <= 0:
        return None
    digits = len(str(int(value))) - 1
    step = 10 ** max(digits - 1, 0) * (5 if digits >= 2 else 1)
    bound = (value // step) * step if down else (value // step + 1) * step
    if down and bound == value:
        bound -= step
    return bound if bound > 0 else None
