"""How each KB predicate is put into words: questions, noun phrases, statements, search keywords, cues.

Questions are composed, not filled into one slot template: a relation's noun
phrase ("the city where {s} was born") nests inside another's question ("When
was {s} founded?") to any depth, every piece has several phrasings, and oblique
cues are shuffled relative clauses. A predicate this table does not know (a
user's own records) falls back to phrasing built from its name, so the same
generator serves any KB: a noun ("director": "the director of {s}"), a field
ending in a preposition ("based_in": "the city {s} is based in"), or a past verb
holding a year ("founded": "When was {s} founded?", "died": "who died in the
1960s"). Booleans are said in words ("is not landlocked", never "no"; see
:func:`searchlab.corpus.records.boolean_text`).

Placeholders: ``{s}`` the subject (a name or a nested noun phrase), ``{v}`` the
value's text, ``{a}``/``{b}`` the two sides of a comparison; in the fallback
phrasings also ``{rel}`` ("who" for a person, else "that"), ``{what}`` ("Who",
"Which city" or "What", by the answer) and ``{t}`` (the type noun of a relation's value).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from searchlab.corpus.records import _PREPOSITIONS, boolean_text, field_words, verb_form


@dataclass(frozen=True)
class Phrasing:
    """Every way one predicate is said; see the module docstring for the placeholders."""

    questions: tuple[str, ...]  # ask for the value of {s}
    phrases: tuple[str, ...] = ()  # noun phrases for the value (relations): "the founder of {s}"
    statements: tuple[str, ...] = ()  # "{s} was born in {v}."
    keywords: tuple[str, ...] = ()  # words a searcher adds to the subject's name
    cues: tuple[str, ...] = ()  # oblique cue for a categorical value or related entity: "born in {v}"
    more: tuple[str, ...] = ()  # numeric cue, above a threshold: "longer than {v} km"
    less: tuple[str, ...] = ()
    compare_max: tuple[str, ...] = ()  # "Which river is longer, {a} or {b}?" (the answer has the larger value)
    compare_min: tuple[str, ...] = ()
    unit: str = ""
    year: bool = False  # a year: cues speak of decades and centuries
    label: str = "attribute"  # logical relation to the subject (BMGQ's fact labels)


def _p(**kw) -> Phrasing:
    return Phrasing(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})


PHRASINGS: dict[str, Phrasing] = {
    # ---------------------------------------------------------------- people
    "birth_year": _p(
        questions=["In which year was {s} born?", "When was {s} born?", "What year was {s} born in?",
                   "What is the birth year of {s}?"],
        statements=["{s} was born in {v}.", "{s}'s year of birth is {v}."],
        keywords=["born", "birth year", "born in year"], year=True, label="temporal",
        cues=["born in {v}"],
        compare_min=["Who was born first, {a} or {b}?", "Which of {a} and {b} was born earlier?",
                     "Who is older, {a} or {b}?"],
        compare_max=["Who was born later, {a} or {b}?", "Which of {a} and {b} is younger?"]),
    "death_year": _p(
        questions=["In which year did {s} die?", "When did {s} die?", "What year did {s} pass away?"],
        statements=["{s} died in {v}.", "{s} passed away in {v}."],
        keywords=["died", "death", "year of death"], year=True, label="temporal", cues=["who died in {v}"],
        compare_min=["Who died first, {a} or {b}?"], compare_max=["Who died later, {a} or {b}?"]),
    "occupation": _p(
        questions=["What was the occupation of {s}?", "What did {s} do for a living?", "What profession did {s} have?"],
        statements=["{s} was a {v}.", "{s} worked as a {v}."], keywords=["occupation", "profession", "worked as"],
        cues=["who worked as a {v}", "working as a {v}"], label="attribute"),
    "born_in": _p(
        questions=["Where was {s} born?", "In which city was {s} born?", "What is the birthplace of {s}?"],
        phrases=["the city where {s} was born", "the birthplace of {s}", "the town {s} was born in"],
        statements=["{s} was born in {v}.", "{s}'s birthplace is {v}."],
        keywords=["born", "birthplace", "born and raised"], cues=["born in {v}", "native to {v}"], label="spatial"),
    "died_in": _p(
        questions=["Where did {s} die?", "In which city did {s} die?"],
        phrases=["the city where {s} died", "the place where {s} died"],
        statements=["{s} died in {v}."], keywords=["died", "death", "died in"], cues=["who died in {v}"],
        label="spatial"),
    "lives_in": _p(
        questions=["Where does {s} live?", "In which city does {s} live?"],
        phrases=["the city {s} lives in", "the home town of {s}"], statements=["{s} lives in {v}."],
        keywords=["lives", "lives in", "home"], cues=["who lives in {v}"], label="spatial"),
    "educated_at": _p(
        questions=["Where was {s} educated?", "Which university did {s} attend?", "Where did {s} study?"],
        phrases=["the university {s} attended", "the institution where {s} studied", "the alma mater of {s}"],
        statements=["{s} was educated at {v}.", "{s} studied at {v}."],
        keywords=["educated", "studied at", "university"], cues=["who studied at {v}", "educated at {v}"],
        label="membership"),
    "works_for": _p(
        questions=["Which company does {s} work for?", "Who is the employer of {s}?"],
        phrases=["the company {s} works for", "the employer of {s}"], statements=["{s} works for {v}."],
        keywords=["works for", "employer", "company"], cues=["who works for {v}", "employed by {v}"],
        label="membership"),
    "member_of": _p(
        questions=["Which institute is {s} a member of?", "To which institute does {s} belong?"],
        phrases=["the institute {s} is a member of", "the institute {s} belongs to"],
        statements=["{s} is a member of {v}."], keywords=["member", "member of", "institute"],
        cues=["belonging to {v}", "who is a member of {v}"], label="membership"),
    "child_of": _p(
        questions=["Who is the parent of {s}?", "Whose child is {s}?"],
        phrases=["the parent of {s}", "{s}'s parent"], statements=["{s} is a child of {v}."],
        keywords=["parent", "child of", "family"], cues=["whose parent is {v}"], label="kinship"),
    "founder_of": _p(
        questions=["Which organisation did {s} found?", "What did {s} found?"],
        phrases=["the organisation {s} founded", "the organisation founded by {s}"],
        statements=["{s} founded {v}."], keywords=["founded", "founder"], cues=["who founded {v}"],
        label="creator/creation"),
    "notable_work": _p(
        questions=["What is the best-known work of {s}?", "Which work is {s} best known for?"],
        phrases=["the best-known work of {s}", "the work {s} is best known for"],
        statements=["{s} is best known for {v}."], keywords=["best known", "notable work", "known for"],
        cues=["best known for {v}"], label="creator/creation"),
    "award": _p(
        questions=["Which award did {s} receive?", "What prize was {s} awarded?"],
        statements=["{s} received the {v}."], keywords=["award", "prize", "awarded"],
        cues=["who received the {v}", "who won the {v}"], label="attribute"),
    "award_year": _p(
        questions=["In which year did {s} receive an award?", "When was {s} awarded a prize?"],
        statements=["{s} was awarded in {v}."], keywords=["award", "prize", "awarded year"], year=True,
        label="temporal", cues=["honoured in {v}"]),
    # ---------------------------------------------------------------- places
    "located_in": _p(
        questions=["Where is {s} located?", "In which country is {s}?", "Where is {s}?"],
        phrases=["the place where {s} is located", "the location of {s}"],
        statements=["{s} is located in {v}.", "{s} lies in {v}."], keywords=["located", "lies in", "country"],
        cues=["located in {v}", "situated in {v}"], label="spatial"),
    "capital_of": _p(
        questions=["Of which country is {s} the capital?"],
        phrases=["the country whose capital is {s}", "the country governed from {s}"],
        statements=["{s} is the capital of {v}."], keywords=["capital", "capital of"], label="spatial"),
    "capital": _p(
        questions=["What is the capital of {s}?", "Which city is the capital of {s}?"],
        phrases=["the capital of {s}", "the capital city of {s}"], statements=["The capital of {s} is {v}."],
        keywords=["capital", "capital city"], label="spatial"),
    "population": _p(
        questions=["What is the population of {s}?", "How many people live in {s}?"],
        statements=["{s} has a population of {v}."], keywords=["population", "inhabitants"],
        more=["with more than {v} inhabitants", "home to over {v} people"],
        less=["with fewer than {v} inhabitants"],
        compare_max=["Which has more inhabitants, {a} or {b}?", "Which is more populous, {a} or {b}?"],
        compare_min=["Which has fewer inhabitants, {a} or {b}?"], label="quantity"),
    "area_km2": _p(
        questions=["What is the area, in square kilometres, of {s}?", "How large is {s} in km²?"],
        statements=["{s} covers {v} square kilometres."], keywords=["area", "square kilometres"], unit="km²",
        more=["covering more than {v} km²"], less=["smaller than {v} km²"],
        compare_max=["Which is larger in area, {a} or {b}?"], label="quantity"),
    "elevation_m": _p(
        questions=["What is the elevation, in metres, of {s}?", "How high is {s}?"],
        statements=["{s} rises to {v} metres.", "{s} lies at {v} metres."], keywords=["elevation", "metres"],
        unit="m", more=["higher than {v} metres", "above {v} metres"], less=["lower than {v} metres"],
        compare_max=["Which is higher, {a} or {b}?", "Which lies higher, {a} or {b}?"], label="quantity"),
    "founded_year": _p(
        questions=["When was {s} founded?", "In which year was {s} founded?", "What year was {s} established?"],
        statements=["{s} was founded in {v}.", "{s} was established in {v}."],
        keywords=["founded", "established", "founding"], year=True, cues=["founded in {v}"],
        compare_min=["Which was founded earlier, {a} or {b}?", "Which is older, {a} or {b}?"],
        compare_max=["Which was founded more recently, {a} or {b}?"], label="temporal"),
    "twinned_with": _p(
        questions=["Which city is {s} twinned with?"], phrases=["the twin city of {s}"],
        statements=["{s} is twinned with {v}."], keywords=["twinned", "twin town"], cues=["twinned with {v}"],
        label="spatial"),
    "lies_on": _p(
        questions=["On which river does {s} lie?", "Which river flows through {s}?"],
        phrases=["the river {s} lies on", "the river that runs through {s}"], statements=["{s} lies on the {v}."],
        keywords=["river", "lies on", "banks"], cues=["on the banks of the {v}", "lying on the {v}"],
        label="spatial"),
    "official_language": _p(
        questions=["What is the official language of {s}?", "Which language is official in {s}?"],
        statements=["The official language of {s} is {v}."], keywords=["official language", "language"],
        cues=["where {v} is the official language"], label="attribute"),
    "currency": _p(
        questions=["What is the currency of {s}?", "Which currency is used in {s}?"],
        statements=["{s} uses the {v}."], keywords=["currency"], cues=["whose currency is the {v}"],
        label="attribute"),
    "independence_year": _p(
        questions=["When did {s} become independent?", "In which year did {s} gain independence?"],
        statements=["{s} became independent in {v}."], keywords=["independence", "independent"], year=True,
        cues=["independent since {v}"], compare_min=["Which became independent first, {a} or {b}?"],
        label="temporal"),
    "highest_point": _p(
        questions=["What is the highest mountain of {s}?", "Which is the highest peak in {s}?"],
        phrases=["the highest mountain of {s}", "the highest peak in {s}"],
        statements=["The highest mountain of {s} is {v}."], keywords=["highest", "highest point", "mountain"],
        label="spatial"),
    "longest_river": _p(
        questions=["What is the longest river of {s}?", "Which river is the longest in {s}?"],
        phrases=["the longest river of {s}", "the longest river in {s}"],
        statements=["The longest river of {s} is the {v}."], keywords=["longest river", "river"], label="spatial"),
    "mountain_range": _p(
        questions=["Which range is {s} part of?", "In which mountain range is {s}?"],
        statements=["{s} is part of the {v}."], keywords=["range", "mountain range"], cues=["in the {v}"],
        label="spatial"),
    "first_ascent_year": _p(
        questions=["When was {s} first climbed?", "In which year was the first ascent of {s}?"],
        statements=["{s} was first climbed in {v}."], keywords=["first ascent", "climbed"], year=True,
        cues=["first climbed in {v}"], compare_min=["Which was climbed first, {a} or {b}?"], label="temporal"),
    "first_ascended_by": _p(
        questions=["Who first climbed {s}?", "Who made the first ascent of {s}?"],
        phrases=["the first person to climb {s}", "the climber who first reached the top of {s}"],
        statements=["{s} was first climbed by {v}."], keywords=["first ascent", "climbed by"],
        cues=["first climbed by {v}"], label="creator/creation"),
    "length_km": _p(
        questions=["How long, in kilometres, is {s}?", "What is the length of {s}?"],
        statements=["{s} is {v} kilometres long."], keywords=["length", "kilometres long"], unit="km",
        more=["longer than {v} km", "over {v} km long"], less=["shorter than {v} km"],
        compare_max=["Which is longer, {a} or {b}?"], compare_min=["Which is shorter, {a} or {b}?"],
        label="quantity"),
    "discharge_m3s": _p(
        questions=["What is the discharge of {s} in cubic metres per second?"],
        statements=["{s} discharges {v} cubic metres per second."], keywords=["discharge", "cubic metres"],
        unit="m³/s", more=["discharging more than {v} m³/s"], label="quantity"),
    "mouth": _p(
        questions=["Into which sea does {s} flow?", "Where does {s} empty?"],
        statements=["{s} flows into {v}."], keywords=["mouth", "flows into", "empties"],
        cues=["flowing into {v}", "emptying into {v}"], label="spatial"),
    "flows_through": _p(
        questions=["Which country does {s} flow through?"], statements=["{s} flows through {v}."],
        keywords=["flows through", "country"], cues=["flowing through {v}", "that crosses {v}"], label="spatial"),
    "rises_at": _p(
        questions=["Where does {s} rise?", "At which mountain is the source of {s}?"],
        phrases=["the mountain where {s} rises", "the source of {s}"], statements=["{s} rises at {v}."],
        keywords=["rises", "source"], cues=["rising at {v}"], label="spatial"),
    # ---------------------------------------------------------------- institutions
    "institution_type": _p(
        questions=["Is {s} a public or a private university?"], statements=["{s} is a {v} university."],
        keywords=["public", "private"], cues=["that is {v}"], label="attribute"),
    "students": _p(
        questions=["How many students does {s} have?"], statements=["{s} has {v} students."],
        keywords=["students", "enrolled"], more=["with more than {v} students"], less=["with fewer than {v} students"],
        compare_max=["Which has more students, {a} or {b}?"], label="quantity"),
    "academic_staff": _p(
        questions=["How many academic staff does {s} employ?"], statements=["{s} has {v} academic staff."],
        keywords=["academic staff", "staff"], more=["with over {v} academic staff"], label="quantity"),
    "employees": _p(
        questions=["How many employees does {s} have?", "How many people work at {s}?"],
        statements=["{s} has {v} employees."], keywords=["employees", "staff"],
        more=["with more than {v} employees"], less=["with fewer than {v} employees"],
        compare_max=["Which has more employees, {a} or {b}?"], label="quantity"),
    "industry": _p(
        questions=["In which industry is {s}?", "What industry does {s} work in?"],
        statements=["{s} is a {v} company."], keywords=["industry", "company"], cues=["in the {v} industry"],
        label="attribute"),
    "field": _p(
        questions=["What field does {s} work in?", "Which field is {s} devoted to?"],
        statements=["{s} works in {v}."], keywords=["field", "research"], cues=["working in {v}", "devoted to {v}"],
        label="attribute"),
    "headquartered_in": _p(
        questions=["Where is {s} headquartered?", "In which city does {s} have its headquarters?"],
        phrases=["the city where {s} is headquartered", "the home city of {s}", "the headquarters city of {s}"],
        statements=["{s} is headquartered in {v}."], keywords=["headquartered", "headquarters", "based"],
        cues=["headquartered in {v}", "based in {v}"], label="spatial"),
    "founded_by": _p(
        questions=["Who founded {s}?", "Who is the founder of {s}?"],
        phrases=["the founder of {s}", "the person who founded {s}"], statements=["{s} was founded by {v}."],
        keywords=["founded by", "founder"], cues=["founded by {v}"], label="creator/creation"),
    "led_by": _p(
        questions=["Who leads {s}?", "Who is the head of {s}?"],
        phrases=["the head of {s}", "the person who leads {s}"], statements=["{s} is led by {v}."],
        keywords=["led by", "head", "leads"], cues=["led by {v}"], label="membership"),
    # ---------------------------------------------------------------- works
    "created_by": _p(
        questions=["Who created {s}?", "Who is the creator of {s}?", "Who made {s}?"],
        phrases=["the creator of {s}", "the person who made {s}"], statements=["{s} was created by {v}."],
        keywords=["created by", "author", "by"], cues=["made by {v}", "created by {v}"], label="creator/creation"),
    "publication_year": _p(
        questions=["When was {s} released?", "In which year did {s} come out?", "What year was {s} published?"],
        statements=["{s} came out in {v}."], keywords=["released", "published", "year"], year=True,
        cues=["released in {v}"], compare_min=["Which came out first, {a} or {b}?"],
        compare_max=["Which was released later, {a} or {b}?"], label="temporal"),
    "genre": _p(
        questions=["What is the genre of {s}?", "Which genre does {s} belong to?"],
        statements=["{s} is a {v} work."], keywords=["genre"], cues=["in the {v} genre"], label="attribute"),
    "language": _p(
        questions=["In which language is {s}?", "What language was {s} made in?"],
        statements=["{s} is in {v}."], keywords=["language", "written in"], cues=["in the {v} language"],
        label="attribute"),
    "published_by": _p(
        questions=["Who published {s}?", "Which company released {s}?"],
        phrases=["the publisher of {s}", "the company that released {s}"], statements=["{s} was published by {v}."],
        keywords=["published by", "publisher", "released by"], cues=["published by {v}", "released by {v}"],
        label="creator/creation"),
    "set_in": _p(
        questions=["Where is {s} set?", "In which city is {s} set?"], phrases=["the city where {s} is set"],
        statements=["{s} is set in {v}."], keywords=["set in", "setting"], cues=["set in {v}"], label="spatial"),
    "filmed_in": _p(
        questions=["Where was {s} filmed?", "In which city was {s} shot?"], phrases=["the city where {s} was filmed"],
        statements=["{s} was filmed in {v}."], keywords=["filmed", "shot in"], cues=["filmed in {v}"],
        label="spatial"),
    "recorded_in": _p(
        questions=["Where was {s} recorded?"], phrases=["the city where {s} was recorded"],
        statements=["{s} was recorded in {v}."], keywords=["recorded", "studio"], cues=["recorded in {v}"],
        label="spatial"),
}

# How an entity of each type is named in a question ("Which {noun} ..."); subtypes refine it.
TYPE_NOUNS: dict[str, tuple[str, ...]] = {
    "person": ("person",), "city": ("city", "town"), "country": ("country",), "river": ("river",),
    "mountain": ("mountain", "peak"), "university": ("university",), "organisation": ("organisation",),
    "work": ("work",), "company": ("company", "firm"), "institute": ("institute", "research institute"),
    "book": ("book", "novel"), "film": ("film", "movie"), "album": ("album", "record"),
}

_TEMPORAL = re.compile(r"(^|_)(year|date|born|founded|since)($|_)")

# Types whose entities are people: cues about them say "who", questions about them "Who".
PERSON_TYPES = frozenset(
    "person people human individual director actor actress author writer novelist poet artist painter sculptor "
    "photographer architect composer musician singer songwriter conductor scientist physicist chemist biologist "
    "mathematician philosopher historian economist engineer inventor explorer politician president king queen "
    "emperor monarch ruler leader athlete player footballer coach climber journalist teacher professor student "
    "founder producer screenwriter character saint pope".split())
_PERSONAL_FACT = re.compile(r"\b(born|birth|died|death)\b")


def words(predicate: str) -> str:
    """``"birth_year"`` / ``"birthYear"`` → ``"birth year"``: a predicate name as plain words."""
    return field_words(predicate)


def is_person(type_: str, predicates=()) -> bool:
    """Whether an entity of this type (with facts of these predicates) is a person: its type is a person noun
    ("director"), or it has a birth or death fact."""
    return (words(type_).rsplit(" ", 1)[-1] in PERSON_TYPES
            or any(_PERSONAL_FACT.search(words(p)) for p in predicates))


def phrasing(predicate: str, numeric: bool = False) -> Phrasing:
    """The phrasing of ``predicate``: the table's, or one built from its name (:func:`_fallback`)."""
    known = PHRASINGS.get(predicate)
    return known if known is not None else _fallback(predicate, numeric)


@lru_cache(maxsize=4096)
def _fallback(predicate: str, numeric: bool) -> Phrasing:
    """Phrasing built from a field's name: a past verb holding a year, a field ending in a preposition, or a noun."""
    w = words(predicate)
    temporal = bool(_TEMPORAL.search(predicate))
    verb = verb_form(predicate) if numeric else None
    if verb is not None:  # "founded": 1917, "died": 1852
        past, base = verb
        if base:  # active: "Ada died in 1852"
            return _p(questions=[f"In which year did {{s}} {base}?", f"When did {{s}} {base}?"],
                      statements=[f"{{s}} {past} in {{v}}."], keywords=[past, f"{past} in"],
                      cues=[f"{{rel}} {past} in {{v}}"], year=True, label="temporal",
                      compare_min=[f"Which of {{a}} and {{b}} {past} first?",
                                   f"Which of {{a}} and {{b}} {past} earlier?"],
                      compare_max=[f"Which of {{a}} and {{b}} {past} later?"])
        return _p(questions=[f"In which year was {{s}} {past}?", f"When was {{s}} {past}?"],  # "UFA was founded"
                  statements=[f"{{s}} was {past} in {{v}}."], keywords=[past, f"{past} in"],
                  cues=[f"{past} in {{v}}"], year=True, label="temporal",
                  compare_min=[f"Which was {past} earlier, {{a}} or {{b}}?",
                               f"Which of {{a}} and {{b}} was {past} first?"],
                  compare_max=[f"Which was {past} later, {{a}} or {{b}}?"])
    head, _, last = w.rpartition(" ")
    if head and last in _PREPOSITIONS:  # "based_in": "UFA is based in Potsdam"
        cues = [f"{{rel}} is {w} {{v}}"] + ([f"{w} {{v}}"] if verb_form(head) is not None else [])
        return _p(questions=[f"{{what}} is {{s}} {w}?"], phrases=[f"the {{t}} {{s}} is {w}"],
                  statements=[f"{{s}} is {w} {{v}}."], keywords=[w, head], cues=cues,
                  label="temporal" if temporal else "spatial" if last in ("in", "at", "near", "on") else "attribute")
    year = numeric and temporal
    if year:
        cues = [f"whose {w} falls in {{v}}", f"with a {w} in {{v}}"]
        compare = {"compare_min": [f"Which has the earlier {w}, {{a}} or {{b}}?"],
                   "compare_max": [f"Which has the later {w}, {{a}} or {{b}}?"]}
    else:
        cues = [f"whose {w} is {{v}}", f"with {w} {{v}}"]
        compare = {"compare_max": [f"Which has the greater {w}, {{a}} or {{b}}?"],
                   "compare_min": [f"Which has the smaller {w}, {{a}} or {{b}}?"]} if numeric else {}
    return _p(questions=[f"{{what}} is the {w} of {{s}}?", f"Name the {w} of {{s}}."],
              phrases=[f"the {w} of {{s}}"], statements=[f"The {w} of {{s}} is {{v}}."], keywords=[w], cues=cues,
              more=[f"with a {w} above {{v}}"] if numeric and not year else [],
              less=[f"with a {w} below {{v}}"] if numeric and not year else [], year=year, **compare,
              label="temporal" if temporal else ("quantity" if numeric else "attribute"))


# ---------------------------------------------------------------------- words for demonstrations
def about(name: str, cue: str) -> str:
    """A sentence saying that ``name`` fits an oblique cue: ``"who died in the 1960s"`` → ``"Ada died in the
    1960s"``, ``"whose genre is drama"`` → ``"Metropolis's genre is drama"``, ``"born in Vienna"`` → ``"Fritz
    Lang is born in Vienna"``."""
    first, _, rest = cue.partition(" ")
    if first in ("who", "that") and rest:
        return f"{name} {rest}"
    if first == "whose" and rest:
        return f"{name}'s {rest}"
    if first == "with" and rest:
        return f"{name} has {rest}"
    return f"{name} is {cue}"


def describe(predicate: str, name: str, value=None) -> str:
    """What a search looks for, as a noun phrase or clause: ``"the founder of X"``, ``"when X was founded"``,
    ``"whether X is landlocked"``, ``"what X is based in"``, ``"the genre of X"``."""
    if isinstance(value, bool):
        return f"whether {name} {boolean_text(predicate, True)}"
    if predicate in PHRASINGS:
        ph = PHRASINGS[predicate]
        return ph.phrases[0].format(s=name) if ph.phrases else f"the {words(predicate)} of {name}"
    w = words(predicate)
    verb = verb_form(predicate) if isinstance(value, (int, float)) else None
    if verb is not None:
        return f"when {name} {verb[0] if verb[1] else 'was ' + verb[0]}"
    head, _, last = w.rpartition(" ")
    if head and last in _PREPOSITIONS:
        return f"what {name} is {w}"
    return f"the {w} of {name}"


def backward_question(predicate: str, value_text: str, value=None, person: bool = False) -> str:
    """What the self-play proposer asks when it walks back from a value: ``"What has Kelmora as its born in?"``
    for the table's predicates (as it always has); for a user's field ``"What was founded in 1917?"``,
    ``"Who died in 1852?"``, ``"What is based in Potsdam?"``, ``"What has Drama as its genre?"``."""
    w = words(predicate)
    if predicate in PHRASINGS:
        return f"What has {value_text} as its {w}?"
    who = "Who" if person else "What"
    verb = verb_form(predicate) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if verb is not None:
        return f"{who} {verb[0] if verb[1] else 'was ' + verb[0]} in {value_text}?"
    head, _, last = w.rpartition(" ")
    if head and last in _PREPOSITIONS:
        return f"{who} is {w} {value_text}?"
    return f"{who} has {value_text} as {'their' if person else 'its'} {w}?"


def compare_words(predicate: str) -> tuple[str, str, str]:
    """``(what both are searched for, "{x}" has the larger value, "{x}" has the smaller)`` in a comparison's
    demonstration: ``("the population of both", "{x} has the larger population.", ...)``; for a past verb
    holding a year ``("the year each was founded", "{x} was founded later.", "{x} was founded earlier.")``."""
    w = words(predicate)
    verb = verb_form(predicate) if predicate not in PHRASINGS else None
    if verb is not None:
        said = verb[0] if verb[1] else f"was {verb[0]}"
        return f"the year each {said}", f"{{x}} {said} later.", f"{{x}} {said} earlier."
    return f"the {w} of both", f"{{x}} has the larger {w}.", f"{{x}} has the smaller {w}."


def type_noun(type_: str, subtype: str, pick) -> str:
    """A noun for an entity of this type ("film" for a work whose subtype is film); ``pick`` chooses a variant."""
    for key in (subtype, type_):
        if key in TYPE_NOUNS:
            return pick(TYPE_NOUNS[key])
    return words(type_) or "entity"


# a vowel letter that sounds like a consonant: "a university", "a European", "a one-off"
_YOU_SOUND = r"(?:uni|use|usu|ute|uto|eu|one\b|once)"
_A_BEFORE_VOWEL = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])(?!" + _YOU_SOUND + ")", re.IGNORECASE)
_SOUNDS_LIKE_YOU = re.compile(_YOU_SOUND, re.IGNORECASE)


def fix_articles(text: str) -> str:
    """``"a entrepreneur"`` → ``"an entrepreneur"`` where a template put "a" before a vowel (not "a university")."""
    return _A_BEFORE_VOWEL.sub(lambda m: m.group(1) + "n ", text)


def article(noun_phrase: str) -> str:
    """``"a historian"`` / ``"an engineer"`` / ``"a university"``: the indefinite article a noun phrase takes."""
    vowel = noun_phrase[:1].lower() in "aeiou" and not _SOUNDS_LIKE_YOU.match(noun_phrase)
    return ("an " if vowel else "a ") + noun_phrase


@dataclass(frozen=True)
class Style:
    """Question frames around an oblique description ("{noun} {desc}": a noun and its post-nominal cues)."""

    oblique_frames: tuple[str, ...] = field(default=(
        "Name the {noun} {desc}.", "What is the name of the {noun} {desc}?", "I am thinking of {desc_a}. What is it?",
        "Identify the {noun} {desc}.", "Which {noun} is the one {desc}?",
        "There is exactly one {noun} {desc}. What is its name?"))
    person_oblique_frames: tuple[str, ...] = field(default=(
        "Who is the person {desc}?", "Name the person {desc}.", "I am thinking of {desc_a}. Who is it?",
        "Identify the {noun} {desc}.", "There is exactly one {noun} {desc}. Who is this?"))


STYLE = Style()


def fact_label(fact) -> str:
    """A KB fact's logical relation to its subject (temporal, spatial, membership, creator/creation, ...): its
    predicate's phrasing's label."""
    return phrasing(fact.predicate, fact.numeric).label
