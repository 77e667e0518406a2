"""Synthesis reads well on a user's own records: booleans, years and references, through the real importer,
KB, question builder, synthesis pipeline (with a real Lucene index) and benchmark suites.

The records file holds countries (``landlocked``: true/false, ``founded``: a year, ``capital``: a reference),
cities (``coastal``, ``founded``, ``country``), people (``born``, the world's ``death_year``, ``is_married``,
``born_in``, ``citizen_of``) and companies (``closed``: a year, ``based_in``).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from searchlab.corpus.kb import KB
from searchlab.corpus.records import import_records
from searchlab.eval.config import WORLD_SUITES
from searchlab.jsonl import read_jsonl
from searchlab.params import IndexParams, RecordsParams
from searchlab.questions.record import QUESTION_TYPES
from searchlab.retrieval import build_index
from searchlab.synth.benchmarks import suite_name, suite_names, write_suites
from searchlab.synth.config import BenchmarksParams, QAParams
from searchlab.synth.generate import Builder
from searchlab.synth.pipeline import synthesize
from tests.searchlab.synth.conftest import RETRIEVER

REFERENCES = ["capital", "country", "born_in", "citizen_of", "based_in"]
COUNTRIES = ["Aruba", "Borduria", "Carpania", "Dalmora", "Elbonia", "Florin", "Genovia", "Hesperia", "Illyria",
             "Jaspia", "Kordavia", "Latveria"]
TOWNS = ["Ashford", "Brill", "Corvale", "Dunmere", "Eastwick", "Fenwick", "Glenrow", "Harlow", "Ivybridge", "Jarrow",
         "Kestrel", "Lowmoor", "Marbury", "Northam", "Oakhurst", "Pennick", "Quarry", "Redcliff", "Stowe", "Thornby",
         "Umber", "Vale", "Westby", "Yarrow"]
FIRST = ["Ada", "Boris", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Irene", "Jonas", "Karin", "Lukas",
         "Mira", "Nils", "Olga", "Pavel", "Rosa", "Sven", "Tessa", "Viktor", "Wanda", "Xaver", "Yara", "Zeno"]
# years that end in 00 and lie in decades ending in 00, to catch "the 1900s" and ambiguous centuries
FOUNDED = [1900, 1905, 1907, 1912, 1918, 1921, 1800, 1803, 2000, 2004, 1100, 1205, 1350, 1500, 1801, 1906]
BORN = [1890, 1900, 1903, 1911, 1925, 1930, 1945, 1950]


def _records() -> list[dict]:
    records = []
    for i, name in enumerate(COUNTRIES):
        records.append({"id": f"c{i}", "type": "country", "name": name, "landlocked": i % 2 == 0,
                        "founded": FOUNDED[i % len(FOUNDED)], "capital": f"t{2 * i}"})
    for i, name in enumerate(TOWNS):
        records.append({"id": f"t{i}", "type": "city", "name": name, "country": f"c{i // 2}", "coastal": i % 3 == 0,
                        "founded": FOUNDED[(i * 5 + 3) % len(FOUNDED)]})
    for i, first in enumerate(FIRST):
        born = BORN[(i * 3) % len(BORN)]
        records.append({"id": f"p{i}", "type": "person", "name": f"{first} {TOWNS[(i * 7) % 24]}son", "born": born,
                        "death_year": born + (60, 70, 80, 100, 105)[i % 5], "is_married": i % 4 < 2,
                        "born_in": f"t{(i * 5) % 24}", "citizen_of": f"c{(i * 5) % 24 // 2}"})
    for i in range(12):
        records.append({"id": f"k{i}", "type": "company", "name": f"{TOWNS[i]} Works", "closed": 1955 + 7 * i,
                        "based_in": f"t{(i * 3) % 24}"})
    return records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("records")
    source = folder / "places.json"
    source.write_text(json.dumps(_records(), indent=1))
    out = folder / "corpus"
    out.mkdir()
    import_records(source, out, RecordsParams(type_field="type", references=REFERENCES))
    return out


@pytest.fixture(scope="module")
def kb(corpus) -> KB:
    return KB.load(corpus)


def _questions(kb: KB, yes_no: bool = False, rounds: int = 4) -> list:
    builder = Builder(kb, random.Random(0), yes_no=yes_no)
    out = []
    for kind in QUESTION_TYPES:
        for n in range(rounds):
            for target in kb.entities:
                q = builder.build(kind, target, f"{kind}-{target}-{n}")
                if q is not None:
                    out.append(q)
    return out


# ------------------------------------------------------------------ passages
def test_booleans_and_years_read_as_sentences_in_passages(corpus):
    passages = {r["id"]: r["contents"] for r in read_jsonl(corpus / "corpus.jsonl")}
    text = "\n".join(passages.values())
    assert "Aruba is landlocked." in passages["c0-0"] and "Borduria is not landlocked." in passages["c1-0"]
    assert "Aruba was founded in 1900." in passages["c0-0"] and "Ashford is coastal." in passages["t0-0"]
    assert "Brill is not coastal." in passages["t1-0"] and "Ada Ashfordson is married." in passages["p0-0"]
    assert "Ada Ashfordson was born in 1890." in passages["p0-0"] and "Ashford Works closed in 1955." in text
    assert not re.search(r"\b(yes|no)\b|'s (landlocked|coastal|is married|founded|born|closed) is", text)
    facts = {(e["id"], f["predicate"]): f for e in read_jsonl(corpus / "kb.jsonl") for f in e["facts"]}
    assert facts["c1", "landlocked"]["value"] is False and facts["c1", "landlocked"]["text"] == "is not landlocked"


# ------------------------------------------------------------------ questions
def test_booleans_never_answer_by_default_and_are_cues_in_words(kb):
    questions = _questions(kb)
    assert len({q.type for q in questions}) == len(QUESTION_TYPES)
    for q in questions:
        assert q.answers[0] not in ("yes", "no") and not q.slot.get("yes_no"), q.question
        assert not re.search(r"\b(yes|no|landlocked is|coastal is)\b", q.question), q.question
        assert not re.search(r"\bthe (landlocked|coastal|founded|born|closed|is married) of\b", q.question), q.question
    boolean_cues = [c.text for q in questions for c in q.constraints if isinstance(c.value, bool)]
    assert {"that is landlocked", "that is not landlocked"} <= set(boolean_cues), sorted(set(boolean_cues))
    assert set(boolean_cues) <= {"that is landlocked", "that is not landlocked", "that is coastal",
                                 "that is not coastal", "who is married", "who is not married"}
    assert any(cue.startswith("who is ") for cue in boolean_cues)  # a person's: "who", not "that"
    assert any("a country that is not landlocked" in q.question for q in questions)  # via a described entity


def test_yes_no_questions_only_when_asked_for_and_answered_from_the_kb(kb):
    asked = [q for q in _questions(kb, yes_no=True, rounds=2) if q.slot.get("yes_no")]
    assert len(asked) >= 20
    wordings = {q.question.split(" ", 1)[0] for q in asked}
    assert wordings <= {"Is", "Does", "Can", "Was", "Did"} and "Is" in wordings
    for q in asked:
        last = q.constraints[-1]
        assert isinstance(last.value, bool) and q.answers == ["yes" if last.value else "no"]
        assert re.search(r" (landlocked|coastal|married)\?$", q.question), q.question
    singles = [q for q in asked if q.type == "single"]
    assert singles and any(q.type in ("bridge", "compose") and q.question.startswith("Is the ") for q in asked)
    for q in singles:  # "Is Aruba landlocked?" -> "yes"
        name = kb[q.mentions[0]].name
        assert q.question in (f"Is {name} landlocked?", f"Is {name} coastal?", f"Is {name} married?"), q.question


def _year_of(kb: KB, c) -> int:
    return next(f.value for f in kb[c.subject].facts[c.predicate])


def test_decades_never_read_as_centuries_and_centuries_count_both_readings(kb):
    ranges = [(q, c) for q in _questions(kb) for c in q.constraints if c.op == "range" and c.low is not None
              and c.high is not None and c.predicate in ("founded", "born", "death_year", "closed")]
    assert ranges
    texts = " ".join(c.text for _, c in ranges)
    assert not re.search(r"\bthe \d{1,2}00s\b", texts), texts  # "the 1900s" would read as a century
    assert re.search(r"\b1900-1909\b|\b2000-2009\b|\b1800-1809\b", texts)  # a 00 decade, named by its years
    assert re.search(r"\bthe 19[1-9]0s\b", texts) and "century" in texts
    for q, c in ranges:
        year = _year_of(kb, c)
        assert c.low <= year < c.high
        decade = re.search(r"\bthe (\d+)s\b", c.text)
        spelled = re.search(r"\b(\d+)-(\d+)\b", c.text)
        century = re.search(r"\bthe (\d+)(st|nd|rd|th) century\b", c.text)
        if decade:
            assert int(decade[1]) % 100 != 0 and (c.low, c.high) == (int(decade[1]), int(decade[1]) + 10)
        elif spelled:
            assert int(spelled[1]) % 100 == 0 and (c.low, int(spelled[2]), c.high) == (
                int(spelled[1]), int(spelled[1]) + 9, int(spelled[1]) + 10)
        else:
            assert century, c.text
            assert year % 100 != 0  # 1900 is in the 19th century to some readers, the 20th to others
            n = int(century[1])
            assert (c.low, c.high) == ((n - 1) * 100, n * 100 + 1)  # both readings of the boundary years count
    # every oblique answer is the only entity of its type that meets all of its cues, counted by brute force
    for q in {id(q): q for q, _ in ranges}.values():
        if q.type != "oblique":
            continue
        meets = [e.id for e in kb.entities.values() if e.type == kb[q.answer_entity].type and all(
            _meets(kb, e, c) for c in q.constraints)]
        assert meets == [q.answer_entity], q.question


def _meets(kb: KB, e, c) -> bool:
    for f in e.facts.get(c.predicate, ()):
        if c.op == "eq" and f.value == c.value and type(f.value) is type(c.value):
            return True
        if c.op == "range" and f.numeric and (c.low is None or f.value >= c.low) and (
                c.high is None or f.value < c.high):
            return True
        if c.op == "via" and f.relation and any(g.value == c.via["value"] for g in kb[f.value].facts.get(
                c.via["predicate"], ())):
            return True
    return False


def test_cues_about_people_are_relative_clauses_with_who(kb):
    questions = _questions(kb)
    texts = [c.text for q in questions for c in q.constraints if q.type == "oblique"]
    died = [t for t in texts if "died" in t]
    assert died and all(t.startswith("who died in ") for t in died), died
    assert any(t.startswith("that closed in ") for t in texts)  # a company: "that", not "who"
    sentences = [q.question for q in questions if q.type == "oblique"]
    assert not any(re.search(r"\b(person|company|firm) (died|closed)\b", s) for s in sentences)
    assert any(re.search(r"\ba person who died in the \d+(st|nd|rd|th) century\b", s) for s in sentences) or any(
        "who died in the" in s for s in sentences)


def test_year_questions_and_comparisons_use_the_verb(kb):
    questions = [q.question for q in _questions(kb)]
    joined = "\n".join(questions)
    assert re.search(r"^(In which year|When) was \S.* founded\?$", joined, re.M)
    assert re.search(r"^(In which year|When) did \S.* close\?$", joined, re.M)
    assert re.search(r"^Who was born (earlier|later), .* or .*\?$|^Which of .* and .* was born first\?$", joined, re.M)
    assert not re.search(r"greater (founded|born|closed)|What (founded|born|closed) does", joined)


# ------------------------------------------------------------------ the pipeline and its suites
def test_synthesis_on_records_gives_records_suites_without_yes_no_answers(corpus, tmp_path):
    index, out = tmp_path / "index", tmp_path / "qa"
    index.mkdir()
    out.mkdir()
    build_index(IndexParams(threads=1), corpus / "corpus.jsonl", index)
    counts = synthesize(QAParams(shard_size=40, attempts_per_target=4, heldout_share=0.5), RETRIEVER, corpus, index,
                        out, tmp_path / "work")
    kept = [r for name in ("train.jsonl", "dev.jsonl", "heldout.jsonl") for r in read_jsonl(out / name)]
    assert counts["kept"] == len(kept) > 20
    assert not any(r["answers"][0] in ("yes", "no") for r in kept)
    assert not any(re.search(r"\b(yes|no)\b|the \d{1,2}00s\b", r["question"]) for r in kept)
    completions = [d["completion"] for d in read_jsonl(out / "demos.jsonl")]
    assert completions and not any(re.search(r"\bis (who|that|whose) ", c) for c in completions)

    suites = tmp_path / "benchmarks"
    suites.mkdir()
    written = write_suites(BenchmarksParams(size=50), out, suites, "records")
    assert sorted(p.name for p in suites.iterdir()) == sorted(f"records-{t}.jsonl" for t in QUESTION_TYPES)
    assert written["train_answer_overlap"] == 0 and sum(written[f"records-{t}"] for t in QUESTION_TYPES) > 0
    assert not any(name.startswith("world-") for name in written)


def test_suite_names_keep_world_for_the_synthetic_world():
    assert suite_names() == suite_names("synthetic") == WORLD_SUITES
    assert suite_names("records") == tuple(f"records-{t}" for t in QUESTION_TYPES)
    assert suite_name("bridge", "records") == "records-bridge"
    with pytest.raises(ValueError, match="no knowledge base"):
        suite_name("single", "beir")
