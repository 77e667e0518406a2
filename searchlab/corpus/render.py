"""Passage text for the synthetic world: Wikipedia-style sections rendered from an entity's facts.

:func:`render` turns one :class:`~searchlab.corpus.entities.Entity` into a few
passages (overview, early life/history, career/geography, ...), each 2-5
sentences. Every fact is stated by a sentence drawn at random from several
templates that all contain the fact's surface text, so the KB can point each
fact at the passage that states it and the text still reads naturally.

A fact is ``(predicate, value, text)``: ``value`` is an int, a str or an
:class:`Entity` (a relation), and ``text`` is the exact string the passage
contains (the related entity's name, a year, "1,234,567", a category).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from searchlab.corpus import vocab
from searchlab.corpus.entities import LAST_YEAR, Entity

Fact = tuple[str, Any, str]
Passage = tuple[str, list[Fact]]  # (text without the title line, facts it states)


# ------------------------------------------------------------------ facts and words
def _rel(predicate: str, other: Entity) -> Fact:
    return predicate, other, other.name


def _year(predicate: str, value: int) -> Fact:
    return predicate, value, str(value)


def _num(predicate: str, value: int) -> Fact:
    return predicate, value, f"{value:,}"


def _cat(predicate: str, value: str) -> Fact:
    return predicate, value, value


def _an(phrase: str) -> str:
    """``"a " + phrase``, or ``"an "`` before a vowel sound: "an engineer", "a 1923 film", "an 1855 novel"."""
    vowel = phrase.startswith(("8", "11", "18")) if phrase[0].isdigit() else phrase[0] in "aeiou"
    return ("an " if vowel else "a ") + phrase


def _mention(e: Entity) -> str:
    """How running text names ``e``: "the University of Kelmora", but "Kelmora University"."""
    return "the " + e.name if e.name.startswith("University of ") else e.name


def _and(names: list[str]) -> str:
    """"A", "A and B", "A, B and C"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _sentence(text: str) -> str:
    """Capitalise the first letter ("the University of X ..." opens a sentence) and drop a doubled
    full stop ("... & Co.." after a name that ends in one)."""
    text = text[0].upper() + text[1:]
    return text[:-1] if text.endswith("..") else text


class _Doc:
    """Collects the passages of one entity, sentence by sentence, with the facts each states."""

    __slots__ = ("rng", "kw", "pages", "used")

    def __init__(self, rng: random.Random, **kw: Any):
        self.rng, self.kw = rng, kw
        self.pages: list[tuple[list[str], list[Fact]]] = []
        self.used: set[str] = set()  # filler already said about this entity; only tested, never iterated

    def page(self) -> None:
        """Start the next passage."""
        self.pages.append(([], []))

    def say(self, templates: tuple[str, ...], *facts: Fact) -> None:
        """Add one sentence (a template drawn at random, filled from ``kw``) stating ``facts``."""
        sentences, stated = self.pages[-1]
        sentences.append(_sentence(self.rng.choice(templates).format_map(self.kw)))
        stated.extend(facts)

    def fill(self, templates: tuple[str, ...], minimum: int = 2) -> None:
        """Pad the passage with fact-free sentences to ``minimum`` (sometimes one more, never over 5)."""
        sentences = self.pages[-1][0]
        fresh = [t for t in templates if t not in self.used]  # never the same filler twice for one entity
        want = max(minimum - len(sentences), 0) + (self.rng.random() < 0.3)
        want = min(want, 5 - len(sentences), len(fresh))
        for t in self.rng.sample(fresh, want) if want > 0 else ():
            self.used.add(t)
            sentences.append(_sentence(t.format_map(self.kw)))

    def passages(self) -> list[Passage]:
        return [(" ".join(sentences), facts) for sentences, facts in self.pages]


# ------------------------------------------------------------------ people
_P_INTRO_DEAD = ("{name} ({b}–{d}) was {occ_a}.", "{name} (born {b}, died {d}) was {occ_a}.",
                 "{name} was {occ_a} who lived from {b} to {d}.",
                 "{name} ({b}–{d}) was {occ_a} whose career spanned several decades.")
_P_INTRO_ALIVE = ("{name} (born {b}) is {occ_a}.", "{name} is {occ_a}, born in {b}.", "Born in {b}, {name} is {occ_a}.")
_P_NOTABLE = ("{P} is best known for the {noun} {work}.", "{Pos} best-known work is the {noun} {work}.",
              "Among {pos} works, the {noun} {work} is the most widely known.")
_P_OVERVIEW_FILL = ("{P} {was} regarded as an influential figure among the {occ}s of {pos} generation.",
                    "{Pos} work drew the attention of contemporaries early on.",
                    "{P} {was} admired for {pos} patience and precision.",
                    "Contemporaries described {obj} as reserved but generous.")
_P_BORN = ("{name} was born in {born_city}.", "{P} was born in {born_city} in {b}.",
           "{name} grew up in {born_city}, where {p} was born in {b}.", "{P} was born and raised in {born_city}.")
_P_PARENT = ("{P} was the {child} of {parent}.", "{Pos} {parent_role}, {parent}, was {parent_occ_a}.",
             "{P} was born to {parent}, {parent_occ_a}.")
_P_EDUCATED = ("{P} studied at {uni}.", "{P} later attended {uni}.",
               "After finishing school, {p} enrolled at {uni}.", "{P} was educated at {uni}.")
_P_EARLY_FILL = ("{Pos} family moved several times during {pos} childhood.",
                 "Little is recorded about {pos} early years.",
                 "{P} showed an early talent for the work that would define {pos} life.",
                 "{P} was the eldest of several children.")
_P_WORKS_FOR = ("{P} worked for {org}.", "{P} joined {org} early in {pos} career.",
                "For many years, {p} was employed by {org}.", "{P} spent much of {pos} working life at {org}.")
_P_MEMBER_OF = ("{P} {was} a member of {org}.", "{P} was elected a member of {org}.", "{P} became a fellow of {org}.")
_P_FOUNDER = ("In {fy}, {p} founded {org2}.", "{P} founded {org2} in {fy}.", "{P} was the founder of {org2}.")
_P_AWARD = ("In {ay}, {p} received the {award}.", "{P} was awarded the {award} in {ay}.",
            "{Pos} honours include the {award}, which {p} received in {ay}.")
_P_ASCENT = ("{P} made the first ascent of {mtn}.", "{P} was the first to reach the summit of {mtn}.")
_P_CAREER_FILL = ("{P} {was} known among colleagues as a meticulous {occ}.",
                  "{Pos} work as {occ_a} took {obj} to many cities.",
                  "{P} wrote extensively about {pos} methods.", "{P} often collaborated with younger colleagues.")
_P_DIED = ("{name} died in {death_city} in {d}.", "{P} died in {death_city} in {d}, at the age of about {age}.",
           "{P} spent {pos} final years in {death_city}, where {p} died in {d}.")
_P_LIVES = ("{P} lives in {home_city}.", "As of {now}, {p} lives in {home_city}.",
            "{P} currently resides in {home_city}.")
_P_MORE_WORKS = ("{Pos} other works include {works}.", "{P} also {made} {works}.",
                 "Later works by {obj} include {works}.")
_P_LATER_FILL = ("{Pos} legacy remains the subject of study.", "A street in {born_city} is named after {obj}.",
                 "{Pos} papers and letters have been preserved.",
                 "Later generations of {occ}s have cited {pos} influence.")
_MADE = {"book": "wrote", "film": "directed", "album": "recorded"}


def _person(e: Entity, rng: random.Random) -> list[Passage]:
    a, back = e.attrs, e.back
    she = e.kind == "f"
    dead = "death_year" in a
    d = _Doc(rng, name=e.name, b=a["birth_year"], d=a.get("death_year"), occ=a["occupation"],
             occ_a=_an(a["occupation"]), P="She" if she else "He", p="she" if she else "he",
             Pos="Her" if she else "His", pos="her" if she else "his", obj="her" if she else "him",
             was="was" if dead else "is", child="daughter" if she else "son", now=LAST_YEAR,
             born_city=a["born_in"].name)
    works = back.get("works", [])

    d.page()  # overview
    facts = [_year("birth_year", a["birth_year"])]
    if dead:
        facts.append(_year("death_year", a["death_year"]))
    d.say(_P_INTRO_DEAD if dead else _P_INTRO_ALIVE, *facts, _cat("occupation", a["occupation"]))
    if works:
        d.kw.update(work=works[0].name, noun=vocab.GENRE_NOUN[works[0].attrs["genre"]])
        d.say(_P_NOTABLE, _rel("notable_work", works[0]))
    d.fill(_P_OVERVIEW_FILL)

    d.page()  # early life
    d.say(_P_BORN, _rel("born_in", a["born_in"]))
    if "child_of" in a:
        parent = a["child_of"]
        d.kw.update(parent=parent.name, parent_role="mother" if parent.kind == "f" else "father",
                    parent_occ_a=_an(parent.attrs["occupation"]))
        d.say(_P_PARENT, _rel("child_of", parent))
    if "educated_at" in a:
        d.kw["uni"] = _mention(a["educated_at"])
        d.say(_P_EDUCATED, _rel("educated_at", a["educated_at"]))
    d.fill(_P_EARLY_FILL)

    d.page()  # career
    for predicate, templates in (("works_for", _P_WORKS_FOR), ("member_of", _P_MEMBER_OF)):
        if predicate in a:
            d.kw["org"] = a[predicate].name
            d.say(templates, _rel(predicate, a[predicate]))
    for org in back.get("founded", [])[:2]:
        d.kw.update(org2=org.name, fy=org.attrs["founded_year"])
        d.say(_P_FOUNDER, _rel("founder_of", org))
    if "award" in a:
        d.kw.update(award=a["award"], ay=a["award_year"])
        d.say(_P_AWARD, _cat("award", a["award"]), _year("award_year", a["award_year"]))
    if "ascents" in back:
        d.kw["mtn"] = back["ascents"][0].name
        d.say(_P_ASCENT)
    d.fill(_P_CAREER_FILL)

    d.page()  # later life and legacy
    if dead:
        d.kw.update(death_city=a["died_in"].name, age=a["death_year"] - a["birth_year"])
        d.say(_P_DIED, _rel("died_in", a["died_in"]))
    else:
        d.kw["home_city"] = a["lives_in"].name
        d.say(_P_LIVES, _rel("lives_in", a["lives_in"]))
    more = works[1:4]
    if more:
        d.kw.update(works=_and([w.name for w in more]), made=_MADE[more[0].kind])
        d.say(_P_MORE_WORKS, *(_rel("notable_work", w) for w in more))
    d.fill(_P_LATER_FILL)
    return d.passages()


# ------------------------------------------------------------------ places
_CITY_CAPITAL = ("{name} is the capital of {country}.", "{name} is the capital city of {country}.",
                 "{name}, the capital of {country}, is the seat of its government.")
_CITY_IN = ("{name} is {noun_a} in {country}.", "{name} is {noun_a} located in {country}.",
            "The {noun} of {name} lies in {country}.")
_CITY_POP = ("It has a population of {pop}.", "{name} has about {pop} inhabitants.",
             "The {noun} is home to {pop} people.", "Its population is {pop}.")
_CITY_OVERVIEW_FILL = ("It is known for its markets and old bridges.", "The {noun} is a regional centre of trade.",
                       "Its university quarter and theatres attract visitors.")
_CITY_FOUNDED = ("{name} was founded in {fy}.", "The first settlement at {name} dates from {fy}.",
                 "Records show that {name} was founded in {fy} as a trading post.",
                 "{name} traces its origins to {fy}.")
_CITY_TWIN = ("{name} is twinned with {twin}.", "{name} has long been a twin town of {twin}.",
              "The {noun} maintains a partnership with {twin}.")
_CITY_HISTORY_FILL = ("It grew steadily as a market {noun} over the following centuries.",
                      "Several buildings from its early history survive in the old quarter.",
                      "Its growth accelerated with the arrival of the railway.",
                      "The {noun} was rebuilt after a great fire.")
_CITY_RIVER = ("{name} lies on the {river}.", "The {river} flows through {name}.",
               "{name} was built on the banks of the {river}.")
_CITY_ELEVATION = ("{name} lies at an elevation of {el} metres.", "The {noun} sits {el} metres above sea level.",
                   "Its centre is {el} metres above sea level.")
_CITY_AREA = ("The municipality covers {area} square kilometres.", "{name} has an area of {area} km².")
_CITY_GEO_FILL = ("The surrounding countryside is mostly farmland.", "Winters in {name} are mild and wet.",
                  "Several parks line the old city walls.")


def _city(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    noun = "city" if a["population"] >= 100_000 else "town"
    d = _Doc(rng, name=e.name, noun=noun, noun_a=_an(noun), country=a["located_in"].name,
             pop=f"{a['population']:,}", fy=a["founded_year"], el=f"{a['elevation_m']:,}", area=f"{a['area_km2']:,}")
    d.page()
    if "capital_of" in a:
        d.say(_CITY_CAPITAL, _rel("located_in", a["located_in"]), _rel("capital_of", a["capital_of"]))
    else:
        d.say(_CITY_IN, _rel("located_in", a["located_in"]))
    d.say(_CITY_POP, _num("population", a["population"]))
    d.fill(_CITY_OVERVIEW_FILL)
    d.page()
    d.say(_CITY_FOUNDED, _year("founded_year", a["founded_year"]))
    if "twinned_with" in a:
        d.kw["twin"] = a["twinned_with"].name
        d.say(_CITY_TWIN, _rel("twinned_with", a["twinned_with"]))
    d.fill(_CITY_HISTORY_FILL)
    d.page()
    if "lies_on" in a:
        d.kw["river"] = a["lies_on"].name
        d.say(_CITY_RIVER, _rel("lies_on", a["lies_on"]))
    d.say(_CITY_ELEVATION, _num("elevation_m", a["elevation_m"]))
    d.say(_CITY_AREA, _num("area_km2", a["area_km2"]))
    d.fill(_CITY_GEO_FILL)
    return d.passages()


_COUNTRY_CAPITAL = ("The capital of {name} is {cap}.", "{name} is a country whose capital is {cap}.",
                    "{name} is a sovereign state with its capital at {cap}.")
_COUNTRY_POP = ("{name} has a population of {pop}.", "About {pop} people live in {name}.",
                "It has {pop} inhabitants.")
_COUNTRY_LANG = ("The official language is {lang}.", "{lang} is the official language of {name}.",
                 "Most of its people speak {lang}, the official language.")
_COUNTRY_INDEPENDENCE = ("{name} became independent in {iy}.", "{name} gained its independence in {iy}.",
                         "The modern state of {name} was established in {iy}.")
_COUNTRY_CURRENCY = ("Its currency is the {cur}.", "The national currency is the {cur}.",
                     "{name} uses the {cur} as its currency.")
_COUNTRY_HISTORY_FILL = ("Its borders have changed several times since then.",
                         "Trade and farming shaped its early economy.",
                         "The country has been a republic for most of its modern history.")
_COUNTRY_AREA = ("{name} covers an area of {area} square kilometres.", "The country has an area of {area} km².")
_COUNTRY_HIGHEST = ("Its highest point is {mtn}.", "The highest mountain in {name} is {mtn}, at {mel} metres.",
                    "{mtn} is the highest peak in the country.")
_COUNTRY_LONGEST = ("The longest river in {name} is the {river}.", "The {river} is the longest river in the country.")
_COUNTRY_GEO_FILL = ("The landscape ranges from coastal plains to upland forests.",
                     "Much of the interior is farmland.", "The climate varies sharply between north and south.")


def _country(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    d = _Doc(rng, name=e.name, cap=a["capital"].name, pop=f"{a['population']:,}", lang=a["official_language"],
             iy=a["independence_year"], cur=a["currency"], area=f"{a['area_km2']:,}")
    d.page()
    d.say(_COUNTRY_CAPITAL, _rel("capital", a["capital"]))
    d.say(_COUNTRY_POP, _num("population", a["population"]))
    d.say(_COUNTRY_LANG, _cat("official_language", a["official_language"]))
    d.page()
    d.say(_COUNTRY_INDEPENDENCE, _year("independence_year", a["independence_year"]))
    d.say(_COUNTRY_CURRENCY, _cat("currency", a["currency"]))
    d.fill(_COUNTRY_HISTORY_FILL)
    d.page()
    d.say(_COUNTRY_AREA, _num("area_km2", a["area_km2"]))
    if "highest_point" in a:
        m = a["highest_point"]
        d.kw.update(mtn=m.name, mel=f"{m.attrs['elevation_m']:,}")
        d.say(_COUNTRY_HIGHEST, _rel("highest_point", m))
    if "longest_river" in a:
        d.kw["river"] = a["longest_river"].name
        d.say(_COUNTRY_LONGEST, _rel("longest_river", a["longest_river"]))
    d.fill(_COUNTRY_GEO_FILL)
    return d.passages()


_RIVER_OVERVIEW = ("The {name} is a river in {countries}, {len} kilometres long.",
                   "The {name} is a {len}-kilometre river that flows through {countries}.",
                   "Flowing through {countries}, the {name} is {len} km long.")
_RIVER_MOUTH = ("It empties into {sea}.", "The river flows into {sea}.", "Its mouth is on {sea}.")
_RIVER_SOURCE = ("The {name} rises on the slopes of {mtn}.", "Its source lies near {mtn}.",
                 "The river has its source at {mtn}.")
_RIVER_DISCHARGE = ("Its average discharge is {q} cubic metres per second.",
                    "The {name} carries an average of {q} m³/s of water.")
_RIVER_TOWNS = ("Towns along its course include {towns}.", "It flows past {towns}.")
_RIVER_FILL = ("The river is navigable for much of its length.", "Its valley is known for orchards and vineyards.",
               "Several dams regulate its flow.", "Floods along its lower course are frequent in spring.")


def _river(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    through = a["flows_through"]
    d = _Doc(rng, name=e.name, countries=_and([c.name for c in through]), len=f"{a['length_km']:,}",
             sea=a["mouth"], q=f"{a['discharge_m3s']:,}")
    d.page()
    d.say(_RIVER_OVERVIEW, *(_rel("flows_through", c) for c in through), _num("length_km", a["length_km"]))
    d.say(_RIVER_MOUTH, _cat("mouth", a["mouth"]))
    d.fill(_RIVER_FILL)
    d.page()
    if "rises_at" in a:
        d.kw["mtn"] = a["rises_at"].name
        d.say(_RIVER_SOURCE, _rel("rises_at", a["rises_at"]))
    d.say(_RIVER_DISCHARGE, _num("discharge_m3s", a["discharge_m3s"]))
    if "towns" in e.back:
        d.kw["towns"] = _and([t.name for t in e.back["towns"][:3]])
        d.say(_RIVER_TOWNS)
    d.fill(_RIVER_FILL)
    return d.passages()


_MOUNTAIN_OVERVIEW = ("{name} is a mountain in {country}, part of the {range}.",
                      "{name} is a peak of the {range} in {country}.",
                      "Part of the {range}, {name} rises in {country}.")
_MOUNTAIN_ELEVATION = ("It rises to {el} metres.", "{name} has an elevation of {el} metres.",
                       "Its summit stands {el} metres above sea level.")
_MOUNTAIN_ASCENT = ("{name} was first climbed in {ay} by {climber}.",
                    "The first ascent of {name} was made by {climber} in {ay}.",
                    "{climber} reached the summit first, in {ay}.")
_MOUNTAIN_UNCLIMBED = ("No ascent of {name} has been recorded.", "The summit of {name} has never been reached.")
_MOUNTAIN_FILL = ("The mountain is popular with hikers in summer.",
                  "Its upper slopes are covered in snow for much of the year.",
                  "A hut below the summit shelters climbers.", "Its north face is known for frequent rockfall.")


def _mountain(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    d = _Doc(rng, name=e.name, country=a["located_in"].name, range=a["mountain_range"], el=f"{a['elevation_m']:,}")
    d.page()
    d.say(_MOUNTAIN_OVERVIEW, _rel("located_in", a["located_in"]), _cat("mountain_range", a["mountain_range"]))
    d.say(_MOUNTAIN_ELEVATION, _num("elevation_m", a["elevation_m"]))
    d.fill(_MOUNTAIN_FILL)
    d.page()
    if "first_ascended_by" in a:
        d.kw.update(climber=a["first_ascended_by"].name, ay=a["first_ascent_year"])
        d.say(_MOUNTAIN_ASCENT, _rel("first_ascended_by", a["first_ascended_by"]),
              _year("first_ascent_year", a["first_ascent_year"]))
    else:
        d.say(_MOUNTAIN_UNCLIMBED)
    d.fill(_MOUNTAIN_FILL)
    return d.passages()


# ------------------------------------------------------------------ institutions and works
_UNI_OVERVIEW = ("{name} is a {itype} university in {city}.",
                 "{name} is a {itype} research university located in {city}.",
                 "Located in {city}, {name} is a {itype} institution of higher education.")
_UNI_FOUNDED = ("It was founded in {fy}.", "{name} was established in {fy}.",
                "The university traces its origins to {fy}.")
_UNI_STUDENTS = ("{name} has about {st} students.", "Around {st} students are enrolled at the university.",
                 "The university enrols some {st} students.")
_UNI_STAFF = ("It employs {staff} academic staff.", "Its faculty numbers {staff} academics.")
_UNI_FILL = ("Its library holds a large collection of manuscripts.", "Teaching is organised in several faculties.",
             "The main building stands on a hill above the old town.", "Its students publish a weekly newspaper.",
             "The university runs a botanical garden.")


def _university(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    d = _Doc(rng, name=_mention(e), city=a["located_in"].name, itype=a["institution_type"], fy=a["founded_year"],
             st=f"{a['students']:,}", staff=f"{a['academic_staff']:,}")
    d.page()
    d.say(_UNI_OVERVIEW, _rel("located_in", a["located_in"]), _cat("institution_type", a["institution_type"]))
    d.say(_UNI_FOUNDED, _year("founded_year", a["founded_year"]))
    d.fill(_UNI_FILL)
    d.page()
    d.say(_UNI_STUDENTS, _num("students", a["students"]))
    d.say(_UNI_STAFF, _num("academic_staff", a["academic_staff"]))
    d.fill(_UNI_FILL)
    return d.passages()


_COMPANY_OVERVIEW = ("{name} is {sector_a} company headquartered in {hq}.",
                     "{name} is a company in the {sector} industry, based in {hq}.",
                     "Based in {hq}, {name} is {sector_a} company.")
_INSTITUTE_OVERVIEW = ("{name} is a research institute for {sector} based in {hq}.",
                       "{name} is an institute devoted to {sector}, located in {hq}.",
                       "Based in {hq}, {name} conducts research in {sector}.")
_ORG_FOUNDED = ("{name} was founded in {fy} by {founder}.", "{founder} founded {name} in {fy}.",
                "The {kind} was established by {founder} in {fy}.")
_ORG_EMPLOYEES = ("It employs about {emp} people.", "{name} has around {emp} employees.",
                  "The {kind} has a staff of {emp}.")
_ORG_LEADER = ("{leader} served as {head} of {name}.", "{name} was for many years led by {leader}.",
               "Its {head} was {leader}.")
_ORG_FILL = {
    "company": ("It expanded steadily in its first decades.", "Its early years were marked by financial difficulties.",
                "The company later opened offices abroad.", "It moved into larger premises after a period of growth.",
                "Its products were exported to neighbouring countries.",
                "The company survived several economic crises."),
    "institute": ("It began as a small circle of scholars.", "Its library is open to visiting researchers.",
                  "The institute publishes an annual journal.",
                  "It moved into larger premises after a period of growth.",
                  "Its early years were marked by financial difficulties.",
                  "The institute later opened a second research station."),
}


def _organisation(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    company = e.kind == "company"
    sector = a["industry" if company else "field"]
    d = _Doc(rng, name=e.name, kind=e.kind, sector=sector, sector_a=_an(sector), hq=a["headquartered_in"].name,
             fy=a["founded_year"], founder=a["founded_by"].name, emp=f"{a['employees']:,}",
             head="chief executive" if company else "director")
    d.page()
    d.say(_COMPANY_OVERVIEW if company else _INSTITUTE_OVERVIEW, _cat("industry" if company else "field", sector),
          _rel("headquartered_in", a["headquartered_in"]))
    d.fill(_ORG_FILL[e.kind])
    d.page()
    d.say(_ORG_FOUNDED, _rel("founded_by", a["founded_by"]), _year("founded_year", a["founded_year"]))
    d.fill(_ORG_FILL[e.kind])
    d.page()
    d.say(_ORG_EMPLOYEES, _num("employees", a["employees"]))
    if "led_by" in a:
        d.kw["leader"] = a["led_by"].name
        d.say(_ORG_LEADER, _rel("led_by", a["led_by"]))
    d.fill(_ORG_FILL[e.kind])
    return d.passages()


_WORK_OVERVIEW = ("{name} is {y_a} {genre} {noun} by {creator}.",
                  "{name} is {genre_a} {noun} {verb} by {creator} in {y}.",
                  "{Released} in {y}, {name} is {genre_a} {noun} by {creator}.")
_WORK_LANGUAGE = {
    "book": ("It was written in {lang}.", "The {noun} was written in {lang}.", "The original text is in {lang}."),
    "film": ("The film is in {lang}.", "Its dialogue is in {lang}.", "It was made in {lang}."),
    "album": ("Its songs are sung in {lang}.", "The lyrics are in {lang}.", "The album is sung in {lang}."),
}
_WORK_PUBLISHER = {
    "book": ("It was published by {pub}.", "{pub} published the first edition."),
    "film": ("The film was produced by {pub}.", "{pub} produced the film."),
    "album": ("It was released on the {pub} label.", "{pub} released the album."),
}
_WORK_SETTING = {
    "book": ("The story is set in {city}.", "Its action takes place in {city}."),
    "film": ("It was filmed in {city}.", "Shooting took place in {city}."),
    "album": ("The album was recorded in {city}.", "Recording sessions took place in {city}."),
}
_WORK_FILL = {
    "book": ("It received mixed reviews on publication.", "It has been translated into several languages.",
             "A revised edition appeared some years later."),
    "film": ("It was a modest success at the box office.", "Critics praised its photography.",
             "A restored version was later shown at festivals."),
    "album": ("Two singles were released from it.", "Critics praised its arrangements.",
              "It was reissued with additional tracks."),
}


def _work(e: Entity, rng: random.Random) -> list[Passage]:
    a = e.attrs
    kind, genre = e.kind, a["genre"]
    year = a["publication_year"]
    d = _Doc(rng, name=e.name, y=year, y_a=_an(str(year)), genre=genre, genre_a=_an(genre),
             noun=vocab.GENRE_NOUN[genre], verb=vocab.CREATED_VERB[kind], creator=a["created_by"].name,
             lang=a["language"], Released="Published" if kind == "book" else "Released")
    d.page()
    d.say(_WORK_OVERVIEW, _rel("created_by", a["created_by"]), _year("publication_year", year), _cat("genre", genre))
    d.say(_WORK_LANGUAGE[kind], _cat("language", a["language"]))
    d.fill(_WORK_FILL[kind])
    d.page()
    if "published_by" in a:
        d.kw["pub"] = a["published_by"].name
        d.say(_WORK_PUBLISHER[kind], _rel("published_by", a["published_by"]))
    setting = vocab.SETTING_PREDICATE[kind]
    d.kw["city"] = a[setting].name
    d.say(_WORK_SETTING[kind], _rel(setting, a[setting]))
    d.fill(_WORK_FILL[kind])
    return d.passages()


_RENDERERS: dict[str, Callable[[Entity, random.Random], list[Passage]]] = {
    "person": _person, "city": _city, "country": _country, "river": _river, "mountain": _mountain,
    "university": _university, "organisation": _organisation, "work": _work,
}


def render(entity: Entity, rng: random.Random) -> list[Passage]:
    """The passages of ``entity`` in section order: ``[(text, [(predicate, value, text), ...]), ...]``.

    The text has no title line (the caller adds ``"Title"\\n``); every fact's
    ``text`` occurs literally in the text of the passage listing it.
    """
    return _RENDERERS[entity.type](entity, rng)
