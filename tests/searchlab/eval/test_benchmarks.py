"""Benchmark loading: the four file shapes, auto-detection, strict record checks with positioned errors, sampling.

Every test writes a real file to ``tmp_path``; expected values are written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchlab.eval.benchmarks import (
    FORMATS,
    BenchmarkError,
    Question,
    detect_format,
    load_benchmark,
)
from searchlab.jsonl import write_jsonl
from searchlab.params import BenchmarksParams
from searchlab.synth.benchmarks import write_suites


def _jsonl(path: Path, lines: list[str]) -> Path:
    """Write raw lines (so a test can put in blank or broken ones) and return the path."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _records_jsonl(path: Path, records: list) -> Path:
    return _jsonl(path, [json.dumps(r) for r in records])


def _json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _raises(match_parts: list[str], call, *args, **kwargs) -> str:
    """Call, expect a BenchmarkError, check each part is in its message, and return the message."""
    with pytest.raises(BenchmarkError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    for part in match_parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


FLASHRAG = [
    {"id": "q1", "question": "Who wrote Hamlet?", "golden_answers": ["William Shakespeare", "Shakespeare"],
     "metadata": {"type": "single", "hops": 1}},
    {"id": "q2", "question": "Capital of France?", "golden_answers": ["Paris"]},
]
NQ_OPEN = [
    {"question": "where is the eiffel tower", "answer": ["Paris"]},
    {"question": "who sang yesterday", "answer": ["The Beatles", "Paul McCartney"]},
]
HOTPOTQA = [
    {"_id": "5a8b57f25542995d1e6f1371", "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
     "answer": "yes", "type": "comparison", "level": "hard",
     "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
     "context": [["Scott Derrickson", ["Scott Derrickson is an American director."]]]},
    {"_id": "5a8c7595554299585d9e36b6", "question": "Which government position was held by the woman?",
     "answer": "Chief of Protocol", "type": "bridge", "level": "medium",
     "supporting_facts": [], "context": []},
]
PLAIN_JSON = [
    {"question": "Largest planet?", "answer": "Jupiter"},
    {"question": "Two primes below 4?", "answers": ["2", "3"], "source": "quiz"},
    {"id": "own-id", "question": "Colour of the sky?", "answer": ["blue"]},
]


# --- each format ---------------------------------------------------------------------------------


def test_flashrag_keeps_ids_answers_and_metadata(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", FLASHRAG)
    assert load_benchmark(path, "b", format="flashrag") == [
        Question("q1", "Who wrote Hamlet?", ["William Shakespeare", "Shakespeare"], {"type": "single", "hops": 1}),
        Question("q2", "Capital of France?", ["Paris"], {}),
    ]


def test_flashrag_extra_top_level_keys_join_metadata_and_a_clash_is_an_error(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", [{**FLASHRAG[0], "split": "test"}])
    assert load_benchmark(path, "b")[0].metadata == {"type": "single", "hops": 1, "split": "test"}
    clash = _records_jsonl(tmp_path / "clash.jsonl", [FLASHRAG[1], {**FLASHRAG[0], "type": "other"}])
    _raises(["clash.jsonl", "line 2", "'type'"], load_benchmark, clash, "b")


def test_nq_open_ids_are_name_and_line(tmp_path):
    # A blank line 2 still counts: ids and errors use the file's own line numbers.
    path = _jsonl(tmp_path / "nq.jsonl", [json.dumps(NQ_OPEN[0]), "", json.dumps(NQ_OPEN[1])])
    assert load_benchmark(path, "nq", format="nq-open") == [
        Question("nq-1", "where is the eiffel tower", ["Paris"], {}),
        Question("nq-3", "who sang yesterday", ["The Beatles", "Paul McCartney"], {}),
    ]


def test_hotpotqa_answer_becomes_a_list_and_context_is_dropped(tmp_path):
    path = _json(tmp_path / "hotpot_dev.json", HOTPOTQA)
    assert load_benchmark(path, "hotpotqa", format="hotpotqa") == [
        Question("5a8b57f25542995d1e6f1371", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"],
                 {"type": "comparison", "level": "hard"}),
        Question("5a8c7595554299585d9e36b6", "Which government position was held by the woman?",
                 ["Chief of Protocol"], {"type": "bridge", "level": "medium"}),
    ]


def test_plain_json_accepts_answer_or_answers_as_string_or_list(tmp_path):
    path = _json(tmp_path / "quiz.json", PLAIN_JSON)
    assert load_benchmark(path, "quiz", format="json") == [
        Question("quiz-0", "Largest planet?", ["Jupiter"], {}),
        Question("quiz-1", "Two primes below 4?", ["2", "3"], {"source": "quiz"}),
        Question("own-id", "Colour of the sky?", ["blue"], {}),
    ]


def test_a_path_given_as_a_string_loads(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", FLASHRAG)
    assert [q.id for q in load_benchmark(str(path), "b")] == ["q1", "q2"]


def test_the_project_world_suites_load_as_flashrag(tmp_path):
    # Write a suite with the project's own writer, from a tiny hand-made held-out split.
    qa, out = tmp_path / "qa", tmp_path / "benchmarks"
    qa.mkdir()
    out.mkdir()
    heldout = [{"id": "bridge-e7-1", "question": "Which river flows through the town Ana was born in?",
                "answers": ["Nal River"], "type": "bridge", "hops": 2, "answer_entity": "e9",
                "features": {"bucket": "medium", "answer_rank": 4}, "evidence": ["e7-0", "e8-1"]}]
    write_jsonl(qa / "heldout.jsonl", heldout)
    write_jsonl(qa / "train.jsonl", [{"answers": ["Somewhere Else"]}])
    write_jsonl(qa / "dev.jsonl", [])
    write_suites(BenchmarksParams(size=5), qa, out)
    suite = out / "world-bridge.jsonl"
    assert detect_format(suite) == "flashrag"
    assert load_benchmark(suite, "world-bridge") == [
        Question("bridge-e7-1", "Which river flows through the town Ana was born in?", ["Nal River"],
                 {"type": "bridge", "hops": 2, "bucket": "medium", "answer_rank": 4, "answer_entity": "e9",
                  "evidence": ["e7-0", "e8-1"]}),
    ]


# --- auto-detection ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "content", "expected"),
    [
        ("a.jsonl", FLASHRAG, "flashrag"),
        ("a.jsonl", NQ_OPEN, "nq-open"),
        ("a.json", HOTPOTQA, "hotpotqa"),
        ("a.json", PLAIN_JSON, "json"),
        ("A.JSONL", FLASHRAG, "flashrag"),  # the extension's case does not matter
    ],
)
def test_detect_format_from_extension_and_first_record(tmp_path, filename, content, expected):
    path = tmp_path / filename
    if filename.lower().endswith(".jsonl"):
        _records_jsonl(path, content)
    else:
        _json(path, content)
    assert detect_format(path) == expected
    assert expected in FORMATS
    assert len(load_benchmark(path, "x")) == len(content)  # format="auto" is the default


def test_detection_skips_leading_blank_lines(tmp_path):
    path = _jsonl(tmp_path / "a.jsonl", ["", "  ", json.dumps(NQ_OPEN[0])])
    assert detect_format(path) == "nq-open"


def test_undetectable_keys_are_named(tmp_path):
    path = _records_jsonl(tmp_path / "odd.jsonl", [{"query": "q", "gold": ["a"]}])
    _raises(["odd.jsonl", "line 1", "'gold'", "'query'"], detect_format, path)
    path = _json(tmp_path / "odd.json", [{"query": "q", "gold": "a"}])
    _raises(["odd.json", "record 0", "'gold'", "'query'"], load_benchmark, path, "x")


def test_unknown_extension_cannot_be_detected(tmp_path):
    path = _records_jsonl(tmp_path / "b.txt", FLASHRAG)
    _raises(["b.txt", "'.txt'", "flashrag"], load_benchmark, path, "b")
    assert len(load_benchmark(path, "b", format="flashrag")) == 2  # an explicit format ignores the extension


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        ({"id": "q3", "golden_answers": ["x"]}, "'question'"),
        ({"id": "q3", "question": "   ", "golden_answers": ["x"]}, "'question'"),
        ({"id": "q3", "question": 7, "golden_answers": ["x"]}, "'question'"),
        ({"id": "q3", "question": "Q?"}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": []}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": "x"}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": ["x", 1971]}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": [True]}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": [""]}, "'golden_answers'"),
        ({"question": "Q?", "golden_answers": ["x"]}, "'id'"),
        ({"id": "q3", "question": "Q?", "golden_answers": ["x"], "metadata": [1]}, "'metadata'"),
    ],
)
def test_flashrag_bad_record_names_file_line_and_key(tmp_path, bad, key):
    path = _records_jsonl(tmp_path / "bad.jsonl", [*FLASHRAG, bad])
    _raises(["bad.jsonl", "line 3", key], load_benchmark, path, "b")


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        ({"question": "Q?"}, "'answer'"),
        ({"question": "Q?", "answer": []}, "'answer'"),
        ({"question": "Q?", "answer": [3.5]}, "'answer'"),
        ({"answer": ["x"]}, "'question'"),
    ],
)
def test_nq_open_bad_record_names_file_line_and_key(tmp_path, bad, key):
    path = _records_jsonl(tmp_path / "nq.jsonl", [NQ_OPEN[0], bad])
    _raises(["nq.jsonl", "line 2", key], load_benchmark, path, "nq", format="nq-open")


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        ({"_id": "x", "question": "Q?", "answer": 1971, "context": []}, "'answer'"),
        ({"_id": "x", "question": "Q?", "answer": False, "context": []}, "'answer'"),
        ({"_id": "x", "question": "Q?", "context": []}, "'answer'"),
        ({"_id": "x", "question": "Q?", "answer": ["a"], "context": []}, "'answer'"),
        ({"question": "Q?", "answer": "a", "context": []}, "'_id'"),
        ({"_id": "x", "question": "", "answer": "a", "context": []}, "'question'"),
    ],
)
def test_hotpotqa_bad_record_names_file_record_and_key(tmp_path, bad, key):
    path = _json(tmp_path / "hp.json", [*HOTPOTQA, bad])
    _raises(["hp.json", "record 2", key], load_benchmark, path, "hp", format="hotpotqa")


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        ({"question": "Q?"}, "'answer'"),
        ({"question": "Q?", "answer": 4}, "'answer'"),
        ({"question": "Q?", "answers": []}, "'answers'"),
        ({"question": "Q?", "answers": ["a", None]}, "'answers'"),
        ({"question": "Q?", "answer": "a", "answers": ["a"]}, "'answers'"),
        ({"question": "Q?", "answer": "a", "id": ""}, "'id'"),
    ],
)
def test_plain_json_bad_record_names_file_record_and_key(tmp_path, bad, key):
    path = _json(tmp_path / "quiz.json", [*PLAIN_JSON, bad])
    _raises(["quiz.json", "record 3", key], load_benchmark, path, "quiz", format="json")


def test_a_record_that_is_not_an_object_is_an_error(tmp_path):
    path = _jsonl(tmp_path / "b.jsonl", [json.dumps(FLASHRAG[0]), '["q", "a"]'])
    _raises(["b.jsonl", "line 2", "JSON object"], load_benchmark, path, "b", format="flashrag")


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = _jsonl(tmp_path / "broken.jsonl", [json.dumps(FLASHRAG[0]), "", '{"id": "q2", "question": '])
    _raises(["broken.jsonl", "line 3", "not valid JSON"], load_benchmark, path, "b")


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"question": "Q?", "answer": "a"},\n  {"question": \n]\n', encoding="utf-8")
    _raises(["broken.json", "line 4", "not valid JSON"], load_benchmark, path, "b")


def test_bytes_that_are_not_utf8_name_file_line_and_bytes(tmp_path):
    # past the first 8 KiB, where a text stream's decoder would count bytes from the start of its chunk, not the file
    lines = [json.dumps({**FLASHRAG[1], "id": f"q{i}"}) for i in range(300)]
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(("".join(line + "\n" for line in lines) + '{"question": "Beyonc\xe9?"}\n').encode("latin-1"))
    _raises([f"{latin1}: line 301: not UTF-8 text: bytes b'\\xe9' at byte 21 of the line, "
             """after '{"question": "Beyonc'"""], load_benchmark, latin1, "b")
    listed = tmp_path / "latin1.json"
    listed.write_bytes(json.dumps(PLAIN_JSON, indent=2).encode() + '\n["Beyonc\xe9"]'.encode("latin-1"))
    line = json.dumps(PLAIN_JSON, indent=2).count("\n") + 2
    _raises([f"{listed}: line {line}: not UTF-8 text: bytes b'\\xe9' at byte 9 of the line"],
            load_benchmark, listed, "b")


def test_json_that_is_not_a_list_is_an_error(tmp_path):
    path = _json(tmp_path / "dict.json", {"data": PLAIN_JSON})
    _raises(["dict.json", "JSON list", "object"], load_benchmark, path, "b", format="json")


@pytest.mark.parametrize(("filename", "text"), [("empty.jsonl", "\n  \n"), ("empty.json", "[]")])
def test_an_empty_benchmark_is_an_error(tmp_path, filename, text):
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    _raises([filename, "no records"], load_benchmark, path, "b")
    _raises([filename, "no records"], detect_format, path)


def test_duplicate_ids_name_both_lines(tmp_path):
    path = _records_jsonl(tmp_path / "dup.jsonl", [FLASHRAG[0], FLASHRAG[1], {**FLASHRAG[1], "question": "Again?"}])
    _raises(["dup.jsonl", "'q2'", "line 2", "line 3"], load_benchmark, path, "b")


def test_duplicate_ids_name_both_records(tmp_path):
    path = _json(tmp_path / "dup.json", [{**HOTPOTQA[0]}, HOTPOTQA[1], {**HOTPOTQA[0], "question": "Again?"}])
    _raises(["dup.json", "record 0", "record 2"], load_benchmark, path, "b")


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "nowhere" / "missing.jsonl"
    _raises([str(missing), "no such"], load_benchmark, missing, "b")
    _raises([str(missing), "no such"], detect_format, missing)
    _raises([str(tmp_path), "not a file"], load_benchmark, tmp_path, "b", format="flashrag")


def test_an_unknown_format_lists_the_valid_ones(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", FLASHRAG)
    _raises(["'squad'", "'auto'", *(f"'{f}'" for f in FORMATS)], load_benchmark, path, "b", format="squad")


@pytest.mark.parametrize("sample", [0, -1, True, 2.0])
def test_sample_must_be_a_whole_number_at_least_one(tmp_path, sample):
    path = _records_jsonl(tmp_path / "b.jsonl", FLASHRAG)
    _raises(["sample", repr(sample)], load_benchmark, path, "b", sample=sample)


# --- sampling ------------------------------------------------------------------------------------


@pytest.fixture
def hundred(tmp_path) -> Path:
    return _records_jsonl(tmp_path / "big.jsonl",
                          [{"id": f"q{i:03d}", "question": f"Question {i}?", "golden_answers": [str(i)]}
                           for i in range(100)])


def test_sample_is_a_seeded_subset_in_file_order(hundred):
    everything = load_benchmark(hundred, "big")
    first = load_benchmark(hundred, "big", sample=10, seed=7)
    assert len(first) == 10 and len({q.id for q in first}) == 10
    assert all(q in everything for q in first)
    assert [q.id for q in first] == sorted(q.id for q in first)  # ids increase down the file
    assert load_benchmark(hundred, "big", sample=10, seed=7) == first
    assert load_benchmark(hundred, "big", sample=10, seed=8) != first


def test_sample_larger_than_the_file_gives_everything(hundred):
    everything = load_benchmark(hundred, "big")
    assert load_benchmark(hundred, "big", sample=100) == everything
    assert load_benchmark(hundred, "big", sample=1000, seed=3) == everything
