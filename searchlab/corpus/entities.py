"""The entity graph of the synthetic world: who and what exists, with typed attributes and relations.

:func:`build_world` draws the whole graph from ``WorldParams.seed``: countries,
cities, rivers, mountains, universities, organisations, people and works, each
with typed attributes (years, numbers, categories) and relations to one another
that form real chains (person → born_in city → located_in country → capital).
Dates are kept plausible (a work appears after its creator's birth, a company
is founded by an adult), and values are shared on purpose (same birth year,
same city, same occupation, family surnames, look-alike names) so that
retrieval meets natural distractors.

Rendering the graph into passages is :mod:`searchlab.corpus.render`'s job.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from searchlab.corpus import vocab
from searchlab.corpus.names import NameMaker, join
from searchlab.params import WorldParams
from searchlab.progress import track

TYPES = ("country", "city", "river", "mountain", "university", "organisation", "person", "work")
LAST_YEAR = 2023  # the world's "now": fixed, so output never depends on the clock

_COUNTRY_SUFFIXES = ("ia", "ia", "ia", "a", "land", "mark", "ora", "esh", "avia", "une")
_CITY_SUFFIXES = ("", "", "", "", "", "", "holm", "ford", "vik", "dal", "ton", "mere", "gard", "port", "stad", "by")
_LANGUAGE_SUFFIXES = ("ic", "ish", "ese", "i", "an")


class Entity:
    """One thing in the world.

    ``attrs`` maps a predicate to its value: an int or str (attribute), an
    :class:`Entity` (relation) or a list of entities (multi-valued relation);
    every entry becomes a KB fact when the entity is rendered. ``back`` holds
    reverse links (a person's works, a river's towns) that passages mention
    without them being facts of this entity.
    """

    __slots__ = ("id", "type", "kind", "name", "attrs", "back")

    def __init__(self, type_: str, kind: str, name: str):
        self.id = ""  # "e<position in corpus order>", assigned once the world is complete
        self.type = type_
        self.kind = kind  # person: "m"/"f"; organisation: company/institute; work: book/film/album
        self.name = name
        self.attrs: dict[str, Any] = {}
        self.back: dict[str, list[Entity]] = {}

    def link_back(self, key: str, other: "Entity") -> None:
        self.back.setdefault(key, []).append(other)

    def __repr__(self) -> str:
        return f"Entity({self.id or '?'}, {self.type}, {self.name!r})"


@dataclass
class World:
    """All entities, in corpus order (``entities[i].id == f"e{i}"``), plus the type lists."""

    entities: list[Entity]
    by_type: dict[str, list[Entity]]


def type_counts(n: int) -> dict[str, int]:
    """How many entities of each type a world of ``n`` entities gets.

    Countries grow with the square root of ``n`` (few), cities and works with
    ``n``; people take the rest (the most). Every type has at least one entity.

    >>> type_counts(1200)["country"], type_counts(1200)["person"]
    (17, 655)
    """
    counts = {
        "country": max(2, round(n**0.5 / 2)),
        "city": 0,
        "river": max(1, round(n * 0.03)),
        "mountain": max(1, round(n * 0.03)),
        "university": max(1, round(n * 0.03)),
        "organisation": max(1, round(n * 0.07)),
        "work": max(1, round(n * 0.2)),
    }
    counts["city"] = max(counts["country"], round(n * 0.08))  # every country gets a capital
    minimum = {**{t: 1 for t in counts}, "country": 2, "city": counts["country"]}
    excess = sum(counts.values()) + max(1, round(n * 0.45)) - n
    for t in ("work", "organisation", "city", "university", "river", "mountain"):
        cut = min(max(excess, 0), counts[t] - minimum[t])
        counts[t] -= cut
        excess -= cut
    counts["person"] = n - sum(counts.values())
    if counts["person"] < 1:
        raise ValueError(f"corpus.world.entities={n} is too small for a world with every entity type")
    return counts


class _Picker:
    """Draws entities at random, weighted (e.g. by population) with O(log n) per draw."""

    def __init__(self, rng: random.Random, items: list[Entity], weights: list[float] | None = None):
        self.rng, self.items = rng, items
        self.cum = list(itertools.accumulate(weights)) if weights else None

    def __call__(self) -> Entity:
        if self.cum is None:
            return self.items[int(self.rng.random() * len(self.items))]
        x = self.rng.random() * self.cum[-1]
        return self.items[min(bisect.bisect_right(self.cum, x), len(self.items) - 1)]


def build_world(params: WorldParams) -> World:
    """Draw the complete entity graph for ``params`` (same params → same world)."""
    return _Builder(params).build()


class _Builder:
    """Draws one world, type by type; each step may link to the types drawn before it.

    Every random draw comes from one ``random.Random(seed)`` in a fixed order,
    which is what makes a world a pure function of its params.
    """

    def __init__(self, params: WorldParams):
        self.rng = random.Random(params.seed)
        self.names = NameMaker(self.rng)
        self.counts = type_counts(params.entities)
        self.share = params.lookalike_share
        self.n = params.entities

    def build(self) -> World:
        self.categories()
        self.countries()
        self.cities()
        self.mountains()
        self.rivers()
        self.universities()
        self.people()
        self.organisations()
        self.employment()
        self.works()
        self.ascents()
        by_type = {"country": self.country_list, "city": self.city_list, "river": self.river_list,
                   "mountain": self.mountain_list, "university": self.university_list,
                   "organisation": self.org_list, "person": self.person_list, "work": self.work_list}
        entities = [e for t in TYPES for e in by_type[t]]
        self.rng.shuffle(entities)  # mix types so any prefix of the corpus looks like the whole
        for i, e in enumerate(entities):
            e.id = f"e{i}"
        return World(entities=entities, by_type=by_type)

    # ---------------------------------------------------------------- helpers
    def pick(self, items: list[Entity]) -> Entity:
        return items[int(self.rng.random() * len(items))]

    def title(self, same_kind: list[Entity], make: Callable[[], str]) -> str:
        """A fresh unique name, or (with probability ``share``) a look-alike of an earlier one of the kind."""
        if same_kind and self.rng.random() < self.share:
            copy = self.names.lookalike(self.pick(same_kind).name)
            if copy:
                return copy
        return self.names.unique(make)

    def pool(self, size: int, make: Callable[[], str]) -> list[str]:
        """``size`` distinct category values (languages, awards, ...) that never clash with titles."""
        return [self.names.unique(make) for _ in range(max(1, size))]

    # ---------------------------------------------------------------- places
    def categories(self) -> None:
        rng, names, n_c = self.rng, self.names, self.counts["country"]
        self.languages = self.pool((n_c * 2) // 3, lambda: join(names.word(2, suffixed=True),
                                                                rng.choice(_LANGUAGE_SUFFIXES)))
        self.currencies = self.pool(n_c // 2 + 1, lambda: f"{names.word(2)} {rng.choice(vocab.CURRENCY_UNITS)}")
        self.seas = self.pool(n_c // 2 + 1, lambda: rng.choice(vocab.SEA_FORMS).format(w=names.word()))
        self.ranges = self.pool(self.counts["mountain"] // 4 + 1,
                                lambda: rng.choice(vocab.RANGE_FORMS).format(w=names.word()))
        self.awards = self.pool(self.n // 400 + 5, lambda: rng.choice(vocab.AWARD_FORMS).format(w=names.word()))

    def countries(self) -> None:
        rng, names = self.rng, self.names
        self.country_list: list[Entity] = []
        for _ in range(self.counts["country"]):
            c = Entity("country", "", self.title(self.country_list, lambda: join(names.word(suffixed=True),
                                                                                  rng.choice(_COUNTRY_SUFFIXES))))
            c.attrs.update(area_km2=int(10 ** rng.uniform(3.7, 6.0)), official_language=rng.choice(self.languages),
                           currency=rng.choice(self.currencies), independence_year=rng.randint(1400, 1990))
            self.country_list.append(c)

    def cities(self) -> None:
        rng, names, countries = self.rng, self.names, self.country_list

        def make() -> str:
            suffix = rng.choice(_CITY_SUFFIXES)
            return join(names.word(suffixed=bool(suffix)), suffix)

        self.city_list: list[Entity] = []
        for i in range(self.counts["city"]):
            city = Entity("city", "", self.title(self.city_list, make))
            capital = i < len(countries)  # the first city of each country is its capital
            country = countries[i] if capital else self.pick(countries)
            city.attrs["located_in"] = country
            if capital:
                city.attrs["capital_of"] = country
                country.attrs["capital"] = city
            city.attrs.update(
                population=int(10 ** (rng.uniform(5.3, 6.7) if capital else rng.uniform(3.3, 6.1))),
                founded_year=rng.randint(600, 1500) if capital else rng.randint(700, 1920),
                elevation_m=int(rng.random() ** 2 * 2400),
                area_km2=rng.randint(8, 900),
            )
            country.link_back("cities", city)
            self.city_list.append(city)
        for country in countries:  # a country is more than its cities: countryside on top
            total = sum(c.attrs["population"] for c in country.back["cities"])
            country.attrs["population"] = int(total * rng.uniform(1.4, 3.5))
        for city in self.city_list:
            if rng.random() < 0.3:
                twin = self.pick(self.city_list)
                if twin is not city:
                    city.attrs["twinned_with"] = twin
        # People cluster in big cities, but not all in the capital: weight by sqrt(population).
        self.pick_city = _Picker(rng, self.city_list, [c.attrs["population"] ** 0.5 for c in self.city_list])

    def mountains(self) -> None:
        rng, names = self.rng, self.names
        forms = ("Mount {w}", "Mount {w}", "{w} Peak", "{w}horn")
        self.mountain_list: list[Entity] = []
        for _ in range(self.counts["mountain"]):
            m = Entity("mountain", "", self.title(self.mountain_list, lambda: rng.choice(forms).format(w=names.word())))
            country = self.pick(self.country_list)
            m.attrs.update(located_in=country, elevation_m=int(1200 + rng.random() ** 1.5 * 7000),
                           mountain_range=rng.choice(self.ranges))
            country.link_back("mountains", m)
            self.mountain_list.append(m)
        for country in self.country_list:
            if "mountains" in country.back:
                country.attrs["highest_point"] = max(country.back["mountains"], key=lambda m: m.attrs["elevation_m"])

    def rivers(self) -> None:
        rng, names = self.rng, self.names
        self.river_list: list[Entity] = []
        for _ in range(self.counts["river"]):
            r = Entity("river", "", self.title(self.river_list, lambda: f"{names.word()} River"))
            k = min(len(self.country_list), 1 if rng.random() < 0.55 else (2 if rng.random() < 0.67 else 3))
            through = rng.sample(self.country_list, k)
            length = int(10 ** rng.uniform(1.6, 3.0) * k)
            r.attrs.update(flows_through=through, length_km=length, mouth=rng.choice(self.seas),
                           discharge_m3s=max(1, int(length * rng.uniform(0.3, 3.0))))
            sources = through[0].back.get("mountains")
            if sources and rng.random() < 0.7:
                r.attrs["rises_at"] = self.pick(sources)
            for country in through:
                country.link_back("rivers", r)
            self.river_list.append(r)
        for country in self.country_list:
            if "rivers" in country.back:
                country.attrs["longest_river"] = max(country.back["rivers"], key=lambda r: r.attrs["length_km"])
        for city in self.city_list:
            nearby = city.attrs["located_in"].back.get("rivers")
            if nearby and rng.random() < 0.5:
                river = self.pick(nearby)
                city.attrs["lies_on"] = river
                river.link_back("towns", city)

    # ---------------------------------------------------------------- people and institutions
    def universities(self) -> None:
        rng, names = self.rng, self.names
        self.university_list: list[Entity] = []
        for _ in range(self.counts["university"]):
            city = self.pick_city()

            def make(city: Entity = city) -> str:
                return rng.choice(vocab.UNIVERSITY_FORMS).format(c=city.name, w=names.word(), s=names.surname())

            control = "public" if rng.random() < 0.7 else "private"
            u = Entity("university", control, self.title(self.university_list, make))
            students = int(10 ** rng.uniform(2.9, 4.8))
            u.attrs.update(located_in=city, founded_year=rng.randint(1100, 1990), institution_type=u.kind,
                           students=students, academic_staff=max(10, students // rng.randint(8, 25)))
            self.university_list.append(u)

    def people(self) -> None:
        rng, names, n_p = self.rng, self.names, self.counts["person"]
        surnames = [names.surname() for _ in range(max(5, n_p // 4))]  # shared: families and namesakes
        given = {g: [names.given_name(g) for _ in range(max(10, n_p // 30))] for g in ("m", "f")}
        people: list[Entity] = []
        for _ in track(range(n_p), total=n_p, desc="world: people", unit="person"):
            parent = self.pick(people) if len(people) > 10 and rng.random() < 0.25 else None
            if parent is not None and parent.attrs["birth_year"] > 1970:
                parent = None
            name = None
            if parent is None and people and rng.random() < self.share:  # a child keeps the family surname
                source = self.pick(people)
                name, gender = names.lookalike(source.name), source.kind
            if name is None:
                gender = "f" if rng.random() < 0.5 else "m"
                surname = parent.name.rsplit(" ", 1)[1] if parent else rng.choice(surnames)
                first = given[gender]
                name = names.unique(lambda: (rng.choice(first) if rng.random() < 0.9 else names.given_name(gender))
                                    + " " + surname)
            person = Entity("person", gender, name)
            a = person.attrs
            born = min(parent.attrs["birth_year"] + rng.randint(20, 40), 1998) if parent else rng.randint(1700, 1998)
            a["birth_year"] = born
            if born < 1930 or (born < 1960 and rng.random() < 0.35):
                a["death_year"] = min(born + rng.randint(40, 95), LAST_YEAR)
            occupation = rng.choice(vocab.OCCUPATION_LIST)
            while vocab.OCCUPATION_SINCE.get(occupation, 0) > born:
                occupation = rng.choice(vocab.OCCUPATION_LIST)
            a["occupation"] = occupation
            a["born_in"] = self.pick_city()
            if parent is not None:
                a["child_of"] = parent
            if rng.random() < 0.7:
                for _ in range(3):  # prefer a university that existed when they were 18
                    uni = self.pick(self.university_list)
                    if uni.attrs["founded_year"] <= born + 18:
                        a["educated_at"] = uni
                        break
            if "death_year" in a:
                a["died_in"] = a["born_in"] if rng.random() < 0.4 else self.pick_city()
            else:
                a["lives_in"] = self.pick_city()
            end = a.get("death_year", LAST_YEAR)
            if rng.random() < 0.25 and end >= born + 30:
                a["award"] = rng.choice(self.awards)
                a["award_year"] = rng.randint(born + 30, min(born + 70, end))
            people.append(person)
        self.person_list = people

    def organisations(self) -> None:
        rng, names, people = self.rng, self.names, self.person_list
        self.org_list: list[Entity] = []
        self.orgs_by_kind: dict[str, list[Entity]] = {"company": [], "institute": []}  # look-alikes keep the kind
        for _ in range(self.counts["organisation"]):
            kind = "company" if rng.random() < 0.7 else "institute"
            founder = self.pick(people)
            for _ in range(5):  # a founder must be an adult before LAST_YEAR
                if founder.attrs["birth_year"] <= 1990:
                    break
                founder = self.pick(people)
            born = founder.attrs["birth_year"]
            founded = max(born + 18, min(born + rng.randint(25, 55), founder.attrs.get("death_year", LAST_YEAR)))
            hq = founder.attrs["born_in"] if rng.random() < 0.5 else self.pick_city()
            surname = founder.name.rsplit(" ", 1)[1]
            if kind == "company":
                sector = rng.choice(vocab.INDUSTRIES)
                while vocab.INDUSTRY_SINCE.get(sector, 0) > founded:  # no 18th-century software companies
                    sector = rng.choice(vocab.INDUSTRIES)

                def make(surname: str = surname) -> str:
                    w = surname if rng.random() < 0.3 else names.word()  # "Holm Brothers", founded by a Holm
                    return f"{w} {rng.choice(vocab.COMPANY_SUFFIXES)}"
            else:
                sector = rng.choice(vocab.FIELDS)

                def make(hq: Entity = hq, sector: str = sector) -> str:
                    return rng.choice(vocab.INSTITUTE_FORMS).format(w=names.word(), c=hq.name, F=sector.title())

            org = Entity("organisation", kind, self.title(self.orgs_by_kind[kind], make))
            org.attrs.update({"industry" if kind == "company" else "field": sector, "headquartered_in": hq,
                              "founded_by": founder, "founded_year": founded,
                              "employees": int(10 ** rng.uniform(1.3, 5.3))})
            founder.link_back("founded", org)
            self.org_list.append(org)
            self.orgs_by_kind[kind].append(org)

    def employment(self) -> None:
        rng = self.rng
        companies, institutes = self.orgs_by_kind["company"], self.orgs_by_kind["institute"]
        for person in self.person_list:
            if rng.random() >= 0.55:
                continue
            scientist = person.attrs["occupation"] in vocab.SCIENTISTS
            options = institutes if (scientist and institutes and rng.random() < 0.8) or not companies else companies
            for _ in range(3):  # prefer an organisation that existed in their working life
                org = self.pick(options)
                if org.attrs["founded_year"] <= person.attrs["birth_year"] + 50:
                    person.attrs["works_for" if org.kind == "company" else "member_of"] = org
                    org.link_back("staff", person)
                    break
        for org in self.org_list:
            staff = org.back.get("staff")
            if staff and rng.random() < 0.7:
                org.attrs["led_by"] = self.pick(staff)

    def works(self) -> None:
        rng, names, people = self.rng, self.names, self.person_list

        def can_create(p: Entity, kind: str) -> bool:
            return vocab.WORK_SINCE[kind] - 20 <= p.attrs["birth_year"] <= 1995

        creators = {k: [p for p in people if vocab.OCCUPATIONS[p.attrs["occupation"]] == k and can_create(p, k)]
                    for k in vocab.GENRES}
        for k, found in creators.items():  # tiny worlds may lack, say, film directors: anyone of the era will do
            creators[k] = found or [p for p in people if can_create(p, k)] or people
        companies = self.orgs_by_kind["company"]
        publishers = {k: [c for c in companies if c.attrs["industry"] == industry] or companies
                      for k, industry in vocab.PUBLISHER_INDUSTRY.items()}

        def make() -> str:
            t = rng.choice(vocab.TITLE_FORMS).format(
                A=rng.choice(vocab.TITLE_ADJECTIVES), N=rng.choice(vocab.TITLE_NOUNS),
                N2=rng.choice(vocab.TITLE_NOUNS), W=names.word())
            return "An " + t[2:] if t.startswith(("A A", "A E", "A I", "A O", "A U")) else t

        self.work_list: list[Entity] = []
        for _ in track(range(self.counts["work"]), total=self.counts["work"], desc="world: works", unit="work"):
            kind = rng.choice(vocab.WORK_KINDS)
            name = None
            if self.work_list and rng.random() < self.share:
                source = self.pick(self.work_list).name
                # English-only titles have no invented word to alter: the look-alike is a sequel
                name = names.lookalike(source) or (source + " II" if names.claim(source + " II") else None)
            work = Entity("work", kind, name or names.unique(make))
            creator = self.pick(creators[kind])
            born = creator.attrs["birth_year"]
            year = min(max(born + rng.randint(20, 60), vocab.WORK_SINCE[kind]),
                       creator.attrs.get("death_year", LAST_YEAR))
            genre, _ = rng.choice(vocab.GENRES[kind])
            home = creator.attrs["born_in"].attrs["located_in"].attrs["official_language"]
            a = work.attrs
            a.update(created_by=creator, publication_year=max(year, born + 16), genre=genre,
                     language=home if rng.random() < 0.8 else rng.choice(self.languages))
            pubs = publishers[kind]
            for _ in range(5 if pubs else 0):  # a publisher that existed by then, if one is found quickly
                pub = self.pick(pubs)
                if pub.attrs["founded_year"] <= a["publication_year"]:
                    a["published_by"] = pub
                    break
            a[vocab.SETTING_PREDICATE[kind]] = self.pick_city()
            creator.link_back("works", work)
            self.work_list.append(work)

    def ascents(self) -> None:
        rng = self.rng
        climbers = [p for p in self.person_list
                    if p.attrs["occupation"] in vocab.CLIMBERS and p.attrs["birth_year"] <= 1990] or self.person_list
        for m in self.mountain_list:
            if rng.random() < 0.85:
                climber = self.pick(climbers)
                born = climber.attrs["birth_year"]
                last = climber.attrs.get("death_year", LAST_YEAR)
                m.attrs["first_ascent_year"] = max(born + 16, min(born + rng.randint(20, 45), last))
                m.attrs["first_ascended_by"] = climber
                climber.link_back("ascents", m)
