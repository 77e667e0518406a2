"""Importing semi-structured records (``corpus.source: records``) as ``corpus.jsonl`` + ``kb.jsonl``."""

import json
import logging
from pathlib import Path

import pytest

from searchlab.corpus import build_corpus, import_records
from searchlab.corpus.records import FACTS_PER_PASSAGE, _words, boolean_question, boolean_text, verb_form
from searchlab.jsonl import RecordError
from searchlab.params import CorpusParams, RecordsParams, load_params

REPO = Path(__file__).resolve().parents[3]
FILMS = [
    {"id": "tokyo", "type": "city", "name": "Tokyo", "country": "Japan"},
    {"id": "toho", "type": "studio", "name": "Toho", "founding_year": 1932, "based_in": "tokyo"},
    {"id": "kurosawa", "type": "director", "name": "Akira Kurosawa", "birth_year": 1910, "born_in": "tokyo"},
    {"id": 7, "type": "film", "name": "Seven Samurai", "year": 1954, "runtime_min": 207, "rating": 8.6,
     "colour": False, "genre": ["action", "drama"], "director": "kurosawa", "studio": "toho",
     "awards": None, "crew": {"editor": "Akira Kurosawa"}},
]
REFS = RecordsParams(type_field="type", references=["director", "studio", "based_in", "born_in"])


def _jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def _import(src: Path, out: Path, params: RecordsParams = REFS, on_error: str = "fail") -> dict:
    out.mkdir(exist_ok=True)
    return import_records(src, out, params, on_error)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _check_consistent(out: Path) -> tuple[list[dict], dict[str, str]]:
    """The invariants QA synthesis relies on; returns ``(kb, contents by passage id)``."""
    kb, corpus = _read(out / "kb.jsonl"), {p["id"]: p["contents"] for p in _read(out / "corpus.jsonl")}
    names = {e["id"]: e["name"] for e in kb}
    assert [pid for e in kb for pid in e["passages"]] == list(corpus)  # same order, nothing else
    for e in kb:
        assert set(e) == {"id", "type", "subtype", "name", "passages", "facts"} and e["subtype"] == ""
        assert e["passages"] == [f"{e['id']}-{k}" for k in range(len(e["passages"]))]
        assert corpus[e["passages"][0]].startswith(f'"{e["name"]}"\n{e["name"]} is a')
        for k, pid in enumerate(e["passages"]):
            assert corpus[pid].startswith(f'"{e["name"]}"\n')
            assert 0 < sum(f["passage"] == pid for f in e["facts"]) <= FACTS_PER_PASSAGE or len(e["facts"]) == 0
        for f in e["facts"]:
            assert set(f) == {"predicate", "value", "kind", "passage", "text"}
            assert f["passage"] in e["passages"] and f["text"] in corpus[f["passage"]]
            if f["kind"] == "relation":
                assert f["value"] in names and f["text"] == names[f["value"]]
    return kb, corpus


# ------------------------------------------------------------------ round trip
def test_round_trip_writes_kb_and_corpus(tmp_path):
    counts = _import(_jsonl(tmp_path / "films.jsonl", FILMS), tmp_path / "out")
    kb, corpus = _check_consistent(tmp_path / "out")
    assert counts == {"entities": 4, "passages": 5, "facts": 13, "skipped": 0, "missing_references": 0}
    assert len(corpus) == counts["passages"] and sum(len(e["facts"]) for e in kb) == counts["facts"]
    film = kb[3]
    assert (film["id"], film["type"], film["name"]) == ("7", "film", "Seven Samurai")
    facts = {(f["predicate"], f["value"]): f for f in film["facts"]}
    assert facts["director", "kurosawa"] == {"predicate": "director", "value": "kurosawa", "kind": "relation",
                                             "passage": facts["director", "kurosawa"]["passage"],
                                             "text": "Akira Kurosawa"}
    assert type(facts["year", 1954]["value"]) is int and facts["year", 1954]["text"] == "1954"
    assert facts["rating", 8.6]["text"] == "8.6" and facts["colour", False]["text"] == "has no colour"
    assert "Seven Samurai has no colour." in corpus["7-0"] + corpus["7-1"]  # a boolean in words, never "no"
    assert corpus["7-0"].startswith('"Seven Samurai"\nSeven Samurai is a film. Seven Samurai\'s year is 1954.')
    assert "Toho is based in Tokyo." in corpus["toho-0"]
    assert "Seven Samurai's runtime min is 207." in corpus["7-0"] + corpus["7-1"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["corpus.jsonl", "kb.jsonl"]


def test_json_list_and_folder_inputs_give_the_same_kb(tmp_path):
    _import(_jsonl(tmp_path / "films.jsonl", FILMS), tmp_path / "a")
    (tmp_path / "films.json").write_text(json.dumps(FILMS, indent=2), encoding="utf-8")
    _import(tmp_path / "films.json", tmp_path / "b")
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "1-places.json").write_text(json.dumps(FILMS[:2]), encoding="utf-8")
    _jsonl(folder / "2-rest.jsonl", FILMS[2:])
    (folder / "notes.txt").write_text("not a record file")
    _import(folder, tmp_path / "c")
    expected = (tmp_path / "a" / "kb.jsonl").read_text()
    for out in ("b", "c"):
        assert (tmp_path / out / "kb.jsonl").read_text() == expected
        assert (tmp_path / out / "corpus.jsonl").read_text() == (tmp_path / "a" / "corpus.jsonl").read_text()


def test_build_corpus_with_a_relative_path(tmp_path):
    _jsonl(_mkdir(tmp_path / "data") / "films.jsonl", FILMS)
    out = _mkdir(tmp_path / "out")
    params = CorpusParams(source="records", path="data/films.jsonl", records=REFS)
    counts = build_corpus(params, tmp_path, out)
    assert counts["entities"] == 4 and counts["missing_references"] == 0
    _check_consistent(out)


def test_default_params_need_no_type_or_references(tmp_path):
    src = _jsonl(tmp_path / "r.jsonl", [{"id": "a", "name": "Alpha", "kind": "x"}, {"id": "b", "name": "Beta"}])
    counts = build_corpus(CorpusParams(source="records", path=str(src)), Path("/"), _mkdir(tmp_path / "out"))
    assert counts == {"entities": 2, "passages": 2, "facts": 1, "skipped": 0, "missing_references": 0}
    kb, corpus = _check_consistent(tmp_path / "out")
    assert [e["type"] for e in kb] == ["record", "record"]
    assert corpus == {"a-0": '"Alpha"\nAlpha is a record. Alpha\'s kind is x.', "b-0": '"Beta"\nBeta is a record.'}


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


# ------------------------------------------------------------------ attributes
def test_attributes_are_auto_detected(tmp_path):
    _import(_jsonl(tmp_path / "films.jsonl", FILMS), tmp_path / "out")
    kb, _ = _check_consistent(tmp_path / "out")
    attributes = [(f["predicate"], f["value"]) for f in kb[3]["facts"] if f["kind"] == "attribute"]
    # id, name, type and reference fields, null values and nested objects are not attributes
    assert attributes == [("year", 1954), ("runtime_min", 207), ("rating", 8.6), ("colour", False),
                          ("genre", "action"), ("genre", "drama")]


def test_listed_attributes_only_and_absent_fields_warn(tmp_path, caplog):
    params = RecordsParams(type_field="type", attributes=["year", "genre", "budget"], references=["director", "sequel"])
    with caplog.at_level(logging.WARNING, logger="searchlab"):
        _import(_jsonl(tmp_path / "films.jsonl", FILMS), tmp_path / "out", params)
    kb, _ = _check_consistent(tmp_path / "out")
    assert [(f["predicate"], f["value"]) for f in kb[3]["facts"]] == [
        ("year", 1954), ("genre", "action"), ("genre", "drama"), ("director", "kurosawa")]
    assert [f for e in kb[:3] for f in e["facts"]] == []  # missing values are simply absent
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "'budget'" in warned and "'sequel'" in warned and "'year'" not in warned


def test_list_valued_attributes_give_one_fact_per_element(tmp_path):
    record = {"id": "p", "name": "Pat", "languages": ["English", "", None, "Welsh", 3], "tags": []}
    _import(_jsonl(tmp_path / "r.jsonl", [record]), tmp_path / "out", RecordsParams())
    kb, corpus = _check_consistent(tmp_path / "out")
    assert [(f["value"], f["text"]) for f in kb[0]["facts"]] == [("English", "English"), ("Welsh", "Welsh"), (3, "3")]
    assert "Pat's languages is English. Pat's languages is Welsh. Pat's languages is 3." in corpus["p-0"]


def test_many_facts_are_chunked_into_passages(tmp_path):
    record = {"id": "x", "name": "X", **{f"field{i}": i for i in range(13)}}
    counts = _import(_jsonl(tmp_path / "r.jsonl", [record]), tmp_path / "out", RecordsParams())
    kb, corpus = _check_consistent(tmp_path / "out")
    assert counts["passages"] == 3 and kb[0]["passages"] == ["x-0", "x-1", "x-2"]
    assert [sum(f["passage"] == p for f in kb[0]["facts"]) for p in kb[0]["passages"]] == [4, 4, 5]
    assert corpus["x-0"].startswith('"X"\nX is a record.') and "is a record" not in corpus["x-1"]


def test_booleans_and_years_in_verb_fields_read_as_sentences(tmp_path):
    records = [{"id": "a", "type": "country", "name": "Aruba", "landlocked": False, "has_coast": True, "founded": 1900,
                "sold": 5000000, "in_colour": True, "colour": False, "can_fly": False},
               {"id": "p", "type": "person", "name": "Ada", "died": 1852, "first_published": 1843, "year": 1815,
                "born": "London", "is_married": True}]
    _import(_jsonl(tmp_path / "r.jsonl", records), tmp_path / "out", RecordsParams(type_field="type"))
    kb, corpus = _check_consistent(tmp_path / "out")
    text = " ".join(corpus.values())
    for sentence in ("Aruba is not landlocked.", "Aruba has coast.", "Aruba was founded in 1900.",
                     "Aruba is in colour.", "Aruba has no colour.", "Aruba cannot fly.", "Ada died in 1852.",
                     "Ada was first published in 1843.", "Ada's year is 1815.", "Ada is married.",
                     "Aruba's sold is 5000000.",  # not a year: said as a noun
                     "Ada's born is London."):  # a verb holding a string: said as a noun
        assert sentence in text, (sentence, text)
    assert " yes" not in text and " no." not in text
    texts = {(f["predicate"], f["value"]): f["text"] for e in kb for f in e["facts"]}
    assert texts["landlocked", False] == "is not landlocked" and texts["is_married", True] == "is married"
    assert texts["founded", 1900] == "1900" and texts["died", 1852] == "1852"  # values and their text as before


def test_boolean_and_verb_wording():
    assert [boolean_text(f, v) for f, v in [("landlocked", True), ("landlocked", False), ("isMarried", False),
                                             ("has_a_navy", False), ("was_renamed", True), ("colour", True),
                                             ("open_on_sundays", False), ("did_compete", False)]] == [
        "is landlocked", "is not landlocked", "is not married", "has no navy", "was renamed", "has colour",
        "is not open on sundays", "did not compete"]
    assert [boolean_question(f) for f in ("landlocked", "has_coast", "can_fly", "was_renamed")] == [
        "Is {s} landlocked?", "Does {s} have coast?", "Can {s} fly?", "Was {s} renamed?"]
    assert [verb_form(f) for f in ("died", "founded", "born", "first_published", "closed", "year", "birth_year",
                                   "speed", "year_founded")] == [
        ("died", "die"), ("founded", None), ("born", None), ("first published", None), ("closed", "close"),
        None, None, None, None]


def test_field_words():
    assert [_words(w) for w in ("runtime_min", "birthYear", "HTTPCode", "based-in", "year")] == [
        "runtime min", "birth year", "http code", "based in", "year"]


# ------------------------------------------------------------------ references
def test_missing_references_are_skipped_counted_and_logged(tmp_path, caplog):
    films = [*FILMS, *({"id": f"f{i}", "type": "film", "name": f"Film {i}", "director": f"nobody{i}"}
                       for i in range(6))]
    films[3] = {**films[3], "studio": ["toho", "daiei"]}
    src = _jsonl(tmp_path / "films.jsonl", films)
    with caplog.at_level(logging.WARNING, logger="searchlab"):
        counts = _import(src, tmp_path / "out")
    assert counts["missing_references"] == 7 and counts["skipped"] == 0 and counts["entities"] == 10
    kb, _ = _check_consistent(tmp_path / "out")
    assert [f["value"] for f in kb[3]["facts"] if f["predicate"] == "studio"] == ["toho"]
    assert all(e["facts"] == [] for e in kb[4:])
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"{src}:4: ") and "'daiei'" in m for m in messages)
    assert sum("unknown id 'nobody" in m for m in messages) == 4  # 5 logged one by one in all
    assert any("7 references to unknown ids" in m for m in messages)


# ------------------------------------------------------------------ errors
def test_missing_path_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        _import(tmp_path / "nowhere.jsonl", tmp_path / "out")


def test_duplicate_id_names_file_and_line(tmp_path):
    src = _jsonl(tmp_path / "films.jsonl", [*FILMS, "", {"id": "toho", "name": "Toho again"}])
    with pytest.raises(RecordError, match=rf"^{src}:6: duplicate id 'toho' \(first at {src}:2\)"):
        _import(src, tmp_path / "out")


def test_duplicate_id_in_a_json_list_names_line_and_item(tmp_path):
    src = tmp_path / "films.json"
    src.write_text(json.dumps([{"id": 1, "name": "A"}, {"id": "1", "name": "B"}], indent=1))
    with pytest.raises(RecordError, match=rf"^{src}:6: item 1: duplicate id '1'"):
        _import(src, tmp_path / "out")


BAD = {
    "not an object": (["a", "list"], "expected a JSON object, got list"),
    "missing id": ({"name": "X"}, "missing or invalid 'id'"),
    "float id": ({"id": 1.5, "name": "X"}, "missing or invalid 'id'"),
    "whitespace id": ({"id": "a b", "name": "X"}, "id 'a b' contains whitespace"),
    "newline id": ({"id": "a\nb", "name": "X"}, "contains whitespace"),
    "missing name": ({"id": "x"}, "record 'x' has no 'name'"),
    "object type": ({"id": "x", "name": "X", "type": {}}, "'type' of 'x' is not a string"),
    "object reference": ({"id": "x", "name": "X", "director": {"id": "tokyo"}}, "reference 'director'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_record_names_file_and_line(tmp_path, case):
    bad, problem = BAD[case]
    src = _jsonl(tmp_path / "films.jsonl", [FILMS[0], bad, FILMS[1]])
    with pytest.raises(RecordError) as err:
        _import(src, tmp_path / "out")
    assert str(err.value).startswith(f"{src}:2: ") and problem in str(err.value)


def test_non_object_in_a_json_list_names_line_and_item(tmp_path):
    src = tmp_path / "r.json"
    src.write_text('[\n  {"id": "a", "name": "A"},\n  42\n]\n')
    with pytest.raises(RecordError, match=rf"^{src}:3: item 1: expected a JSON object, got int"):
        _import(src, tmp_path / "out", RecordsParams())


def test_listed_attribute_holding_an_object_is_malformed(tmp_path):
    src = _jsonl(tmp_path / "films.jsonl", FILMS)
    with pytest.raises(RecordError, match=rf"^{src}:4: attribute 'crew' of '7'"):
        _import(src, tmp_path / "out", RecordsParams(attributes=["crew"]))


@pytest.mark.parametrize("text", ["", "\n  \n", "[]", " [ ] "])
def test_empty_source_is_an_error(tmp_path, text):
    src = tmp_path / ("r.json" if "[" in text else "r.jsonl")
    src.write_text(text)
    with pytest.raises(ValueError, match=rf"^{src}: no records$"):
        _import(src, tmp_path / "out")


def test_invalid_json_names_the_line(tmp_path):
    src = _jsonl(tmp_path / "r.jsonl", [FILMS[0], '{"id": "x", "name": ', FILMS[1]])
    with pytest.raises(RecordError, match=rf"^{src}:2: not valid JSON"):
        _import(src, tmp_path / "out")
    src = tmp_path / "r.json"
    src.write_text('[\n  {"id": "a", "name": "A"},\n  {"id": "b" "name": "B"}\n]\n')
    with pytest.raises(ValueError, match=rf"^{src}:3: not valid JSON"):
        _import(src, tmp_path / "out")


def test_json_file_must_hold_a_list(tmp_path):
    src = tmp_path / "r.json"
    src.write_text(json.dumps(FILMS[0]))
    with pytest.raises(ValueError, match="expected a JSON list of records, got a dict"):
        _import(src, tmp_path / "out")


def test_field_both_attribute_and_reference_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="both as attributes and references"):
        _import(_jsonl(tmp_path / "r.jsonl", FILMS), tmp_path / "out",
                RecordsParams(attributes=["year", "director"], references=["director"]))


def test_skip_mode_counts_malformed_records(tmp_path, caplog):
    lines = [*FILMS, "{not json", ["x"], {"name": "No id"}, {"id": "a b", "name": "Spaced"},
             {"id": "toho", "name": "Toho again"}, {"id": "anon"}, {"id": "f2", "name": "Other", "director": "anon"}]
    src = _jsonl(tmp_path / "films.jsonl", lines)
    with caplog.at_level(logging.WARNING, logger="searchlab"):
        counts = _import(src, tmp_path / "out", on_error="skip")
    # the reference to the skipped record "anon" is a missing reference
    assert counts == {"entities": 5, "passages": 6, "facts": 13, "skipped": 6, "missing_references": 1}
    kb, _ = _check_consistent(tmp_path / "out")
    assert [e["id"] for e in kb] == ["tokyo", "toho", "kurosawa", "7", "f2"]
    assert kb[1]["name"] == "Toho"  # the first of two duplicates is kept
    assert sum("skipped malformed record" in r.getMessage() for r in caplog.records) == 6


def test_all_records_skipped_is_an_error(tmp_path):
    src = _jsonl(tmp_path / "r.jsonl", [{"name": "A"}, {"name": "B"}])
    with pytest.raises(ValueError, match="no valid passages"):
        _import(src, tmp_path / "out", on_error="skip")


# ------------------------------------------------------------------ the shipped example
def test_example_imports_cleanly(tmp_path, caplog):
    params = load_params(REPO / "examples" / "records" / "params.yaml")
    assert params.corpus.source == "records"
    with caplog.at_level(logging.WARNING, logger="searchlab"):
        counts = build_corpus(params.corpus, REPO, _mkdir(tmp_path / "out"))
    assert [r.getMessage() for r in caplog.records] == []
    assert counts["entities"] >= 12 and counts["skipped"] == 0 and counts["missing_references"] == 0
    kb, _ = _check_consistent(tmp_path / "out")
    assert {e["type"] for e in kb} == {"film", "director", "studio", "city"}
    assert {f["predicate"] for e in kb for f in e["facts"] if f["kind"] == "relation"} == set(
        params.corpus.records.references)
    text = " ".join(json.loads(line)["contents"] for line in (tmp_path / "out/corpus.jsonl").read_text().splitlines())
    assert "Metropolis is not in colour." in text and "Spirited Away is in colour." in text
    assert "Fritz Lang died in 1976." in text
