"""The synthetic world: format, facts entailed by their passages, typed chains, distractors, determinism."""

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from searchlab.corpus import build_corpus
from searchlab.corpus.entities import TYPES, type_counts
from searchlab.corpus.vocab import FIXED_WORDS, REAL_NAMES
from searchlab.corpus.world import generate_world
from searchlab.params import CorpusParams, WorldParams

REPO = Path(__file__).resolve().parents[3]


def _generate(out: Path, **world) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    return generate_world(WorldParams(**world), out)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A 400-entity world: (counts, passages by id, kb entities by id, out dir)."""
    out = tmp_path_factory.mktemp("world")
    counts = _generate(out, seed=7, entities=400)
    passages = {p["id"]: p["contents"] for p in _read(out / "corpus.jsonl")}
    kb = {e["id"]: e for e in _read(out / "kb.jsonl")}
    return counts, passages, kb, out


def _body(contents: str) -> str:
    return contents.split("\n", 1)[1]


def test_passages_have_search_r1_form_and_documented_ids(world):
    counts, passages, kb, out = world
    lines = (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(passages) == counts["passages"]  # ids are unique
    assert counts["entities"] == len(kb) == 400
    for entity in kb.values():
        assert entity["passages"] == [f"{entity['id']}-{k}" for k in range(len(entity["passages"]))]
        for pid in entity["passages"]:
            title, text = passages[pid].split("\n", 1)
            assert title == f'"{entity["name"]}"'
            sentences = re.findall(r"[.!?](?:\s|$)", text)
            assert 2 <= len(sentences) <= 5, passages[pid]
    assert sum(len(e["passages"]) for e in kb.values()) == counts["passages"]
    assert list(kb) == [f"e{i}" for i in range(len(kb))]  # kb and corpus share the entity order
    assert [pid.rsplit("-", 1)[0] for pid in passages] == [e for e in kb for _ in kb[e]["passages"]]


def test_every_fact_is_stated_in_the_passage_it_points_to(world):
    counts, passages, kb, _ = world
    n = 0
    for entity in kb.values():
        for fact in entity["facts"]:
            n += 1
            assert fact["passage"] in entity["passages"]
            text = _body(passages[fact["passage"]])
            assert fact["text"] in text, (fact, text)
            if fact["kind"] == "relation":
                assert fact["text"] == kb[fact["value"]]["name"]
            elif isinstance(fact["value"], int):
                assert fact["text"] in (str(fact["value"]), f"{fact['value']:,}")
            else:
                assert fact["text"] == fact["value"]
    assert n == counts["facts"] > 1000


def test_all_entity_types_and_relations_are_present_and_typed(world):
    _, _, kb, _ = world
    assert {e["type"] for e in kb.values()} == set(TYPES)
    # predicate -> the type every related entity must have (per subject type where it differs)
    expected = {
        ("person", "born_in"): "city", ("person", "died_in"): "city", ("person", "educated_at"): "university",
        ("person", "works_for"): "organisation", ("person", "member_of"): "organisation",
        ("person", "child_of"): "person", ("person", "notable_work"): "work",
        ("city", "located_in"): "country", ("city", "capital_of"): "country", ("city", "lies_on"): "river",
        ("country", "capital"): "city", ("river", "flows_through"): "country",
        ("mountain", "located_in"): "country", ("mountain", "first_ascended_by"): "person",
        ("university", "located_in"): "city", ("organisation", "founded_by"): "person",
        ("organisation", "headquartered_in"): "city", ("work", "created_by"): "person",
        ("work", "published_by"): "organisation",
    }
    seen = Counter()
    for entity in kb.values():
        for fact in entity["facts"]:
            key = (entity["type"], fact["predicate"])
            seen[key] += 1
            if fact["kind"] == "relation":
                assert kb[fact["value"]]["type"] == expected.get(key, kb[fact["value"]]["type"]), (entity, fact)
    missing = [key for key in expected if not seen[key]]
    assert not missing
    attributes = {"birth_year", "death_year", "occupation", "population", "founded_year", "length_km", "elevation_m",
                  "employees", "genre", "industry", "language", "official_language", "publication_year", "students"}
    assert attributes <= {p for _, p in seen}


def test_relations_form_multi_hop_chains(world):
    _, _, kb, _ = world
    facts = {e: {} for e in kb}
    for eid, entity in kb.items():
        for fact in entity["facts"]:
            facts[eid].setdefault(fact["predicate"], fact["value"])
    chains = 0
    for eid, entity in kb.items():
        if entity["type"] != "person":
            continue
        city = facts[eid]["born_in"]  # person -> city -> country -> capital, and the capital points back
        country = facts[city]["located_in"]
        capital = facts[country]["capital"]
        assert facts[capital]["capital_of"] == country
        chains += 1
    work_chains = sum(1 for eid, e in kb.items() if e["type"] == "work"
                      and "educated_at" in facts[facts[eid]["created_by"]])
    assert chains > 100 and work_chains > 10


def test_names_have_lookalikes_and_values_are_shared(world):
    _, _, kb, _ = world
    names = [e["name"] for e in kb.values()]
    assert len(set(names)) == len(names)  # titles are unique
    assert not {w.lower() for n in names for w in n.split() if w not in FIXED_WORDS} & REAL_NAMES
    by_type = {}
    for e in kb.values():
        by_type.setdefault((e["type"], len(e["name"])), []).append(e["name"])
    pairs = sum(1 for group in by_type.values() for i, a in enumerate(group) for b in group[i + 1:]
                if sum(x != y for x, y in zip(a, b)) == 1)
    assert pairs >= 20  # e.g. "Varden Holm" / "Vardan Holm"
    people = [e for e in kb.values() if e["type"] == "person"]
    values = lambda p: Counter(f["value"] for e in people for f in e["facts"] if f["predicate"] == p)  # noqa: E731
    assert values("birth_year").most_common(1)[0][1] >= 2
    assert values("born_in").most_common(1)[0][1] >= 5
    assert values("occupation").most_common(1)[0][1] >= 5
    assert Counter(e["name"].split()[-1] for e in people).most_common(1)[0][1] >= 3  # families, namesakes


def test_lookalike_share_controls_near_copies(tmp_path):
    def near_pairs(share):
        out = tmp_path / str(share)
        _generate(out, entities=400, lookalike_share=share)
        names = [e["name"] for e in _read(out / "kb.jsonl")]
        seen, pairs = set(names), 0
        for name in names:
            pairs += any(name[:i] + c + name[i + 1:] in seen for i in range(1, len(name)) for c in "aeioukcszdtvwmn"
                         if c != name[i])
        return pairs

    assert near_pairs(0.4) > 3 * max(near_pairs(0.0), 5)


def test_phrasing_varies_across_entities(world):
    _, passages, kb, _ = world
    shapes = Counter()
    for entity in kb.values():
        if entity["type"] == "person":
            first = _body(passages[entity["passages"][1]]).split(". ")[0]
            shapes[re.sub(r"[A-Z][a-z]+|\d+", "X", first)] += 1
    assert len(shapes) >= 4  # several templates for the same fact, drawn at random


def test_same_params_give_identical_bytes_even_across_processes(tmp_path):
    _generate(tmp_path / "a", seed=3, entities=150)
    _generate(tmp_path / "b", seed=3, entities=150)
    code = ("import sys; from pathlib import Path; from searchlab.params import WorldParams;"
            "from searchlab.corpus.world import generate_world;"
            "Path(sys.argv[1]).mkdir(); generate_world(WorldParams(seed=3, entities=150), Path(sys.argv[1]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a different str-hash order must not leak into output
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "c")], check=True, env=env, cwd=REPO)
    for name in ("corpus.jsonl", "kb.jsonl"):
        a = (tmp_path / "a" / name).read_bytes()
        assert a == (tmp_path / "b" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()
    _generate(tmp_path / "d", seed=4, entities=150)
    assert (tmp_path / "d" / "corpus.jsonl").read_bytes() != (tmp_path / "a" / "corpus.jsonl").read_bytes()


@pytest.mark.parametrize("entities", [10, 60])
def test_tiny_worlds_still_have_every_type(tmp_path, entities):
    counts = _generate(tmp_path, entities=entities)
    kb = _read(tmp_path / "kb.jsonl")
    assert counts["entities"] == entities and {e["type"] for e in kb} == set(TYPES)


def test_type_mix_and_passages_per_entity(tmp_path):
    mix = type_counts(1200)
    assert mix["country"] < mix["city"] < mix["work"] < mix["person"] and sum(mix.values()) == 1200
    counts = build_corpus(CorpusParams(world=WorldParams(entities=1200)), REPO, tmp_path)
    assert 3.0 <= counts["passages"] / counts["entities"] <= 4.0
    assert counts["skipped"] == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "kb.jsonl"]
