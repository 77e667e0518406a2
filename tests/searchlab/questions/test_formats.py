"""Benchmark loading: the five file shapes, auto-detection, one id scheme, strict record checks with positioned
errors, a given format the file does not look like, sampling.

Every test writes a real file to ``tmp_path``; expected values are written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from searchlab.questions.formats import (
    FORMATS,
    BenchmarkError,
    Question,
    detect_format,
    load_benchmark,
)
from searchlab.jsonl import write_jsonl
from searchlab.synth.benchmarks import write_suites
from searchlab.synth.config import BenchmarksParams


def _jsonl(path: Path, lines: list[str]) -> Path:
    """Write raw lines (so a test can put in blank or broken ones) and return the path."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _records_jsonl(path: Path, records: list) -> Path:
    return _jsonl(path, [json.dumps(r) for r in records])


def _json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _parquet(path: Path, records: list) -> Path:
    """Write records as a real Parquet file, the way Search-R1 does (a table from the rows)."""
    pd.DataFrame(records).to_parquet(path)
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
# R1-Searcher's eval sets: one answer string per question.
R1_SEARCHER = [
    {"question": "Who directed Jaws?", "answer": "Steven Spielberg"},
    {"question": "Which element has symbol Fe?", "answer": "Iron"},
]
# Search-R1's prompt template (scripts/data_process/*_search.py), which ends with the question.
SEARCH_R1_PROMPT = ("Answer the given question. You must conduct reasoning inside <think> and </think> first every "
                    "time you get new information. ... For example, <answer> Beijing </answer>. Question: {q}\n")


def _search_r1_row(text: str, target, index: int, **extra) -> dict:
    """A verl row as Search-R1's data scripts write it, without the FlashRAG columns they keep."""
    return {"data_source": "nq", "prompt": [{"role": "user", "content": SEARCH_R1_PROMPT.format(q=text)}],
            "ability": "fact-reasoning", "reward_model": {"style": "rule", "ground_truth": {"target": target}},
            "extra_info": {"split": "test", "index": index}, **extra}


SEARCH_R1 = [
    _search_r1_row("who got the first nobel prize in physics?", ["Wilhelm Conrad Röntgen"], 0),
    _search_r1_row("when is the next deadpool movie being released?", ["May 18, 2018"], 1),
]
SEARCH_R1_METADATA = [{"data_source": "nq", "ability": "fact-reasoning", "extra_info": {"split": "test", "index": i}}
                      for i in range(2)]
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


def test_nq_open_ids_are_name_and_record_index(tmp_path):
    # A blank line 2 is not a record: ids count records from 0, errors name the file's own lines.
    path = _jsonl(tmp_path / "nq.jsonl", [json.dumps(NQ_OPEN[0]), "", json.dumps(NQ_OPEN[1])])
    assert load_benchmark(path, "nq", format="nq-open") == [
        Question("nq-0", "where is the eiffel tower", ["Paris"], {}),
        Question("nq-1", "who sang yesterday", ["The Beatles", "Paul McCartney"], {}),
    ]
    broken = _jsonl(tmp_path / "broken.jsonl", [json.dumps(NQ_OPEN[0]), "", json.dumps({"question": "Q?"})])
    _raises(["broken.jsonl", "line 3", "'answer'"], load_benchmark, broken, "nq")


def test_nq_open_single_answer_string_as_in_r1_searcher(tmp_path):
    path = _records_jsonl(tmp_path / "bamboogle.jsonl", R1_SEARCHER)
    assert detect_format(path) == "nq-open"
    assert load_benchmark(path, "bamboogle") == [
        Question("bamboogle-0", "Who directed Jaws?", ["Steven Spielberg"], {}),
        Question("bamboogle-1", "Which element has symbol Fe?", ["Iron"], {}),
    ]


def test_single_answer_strings_in_every_format(tmp_path):
    flashrag = _records_jsonl(tmp_path / "f.jsonl", [{"id": "q1", "question": "Q?", "golden_answers": "A"}])
    assert load_benchmark(flashrag, "f")[0].answers == ["A"]
    hotpot = _json(tmp_path / "h.json", [{**HOTPOTQA[0], "answer": ["yes", "Yes"]}])
    assert load_benchmark(hotpot, "h")[0].answers == ["yes", "Yes"]


def test_search_r1_jsonl_question_from_the_prompt_answers_from_the_target(tmp_path):
    rows = [SEARCH_R1[0], _search_r1_row("when is the next deadpool movie being released?", "May 18, 2018", 1)]
    path = _records_jsonl(tmp_path / "nq_search_test.jsonl", rows)  # the second target is one string
    assert detect_format(path) == "search-r1"
    assert load_benchmark(path, "nq") == [
        Question("nq-0", "who got the first nobel prize in physics?", ["Wilhelm Conrad Röntgen"],
                 SEARCH_R1_METADATA[0]),
        Question("nq-1", "when is the next deadpool movie being released?", ["May 18, 2018"], SEARCH_R1_METADATA[1]),
    ]


def test_search_r1_parquet_target_list_read_back(tmp_path):
    path = _parquet(tmp_path / "test.parquet", SEARCH_R1)
    # the file is what pandas users meet: the target list comes back as a numpy array
    assert type(pd.read_parquet(path)["reward_model"][0]["ground_truth"]["target"]).__name__ == "ndarray"
    assert detect_format(path) == "search-r1"
    questions = load_benchmark(path, "nq", format="search-r1")
    assert questions == [
        Question("nq-0", "who got the first nobel prize in physics?", ["Wilhelm Conrad Röntgen"],
                 SEARCH_R1_METADATA[0]),
        Question("nq-1", "when is the next deadpool movie being released?", ["May 18, 2018"], SEARCH_R1_METADATA[1]),
    ]
    assert all(type(q.answers) is list and type(q.answers[0]) is str for q in questions)
    json.dumps([q.metadata for q in questions])  # plain Python values, so predictions can be written as JSON


def test_search_r1_as_released_keeps_flashrag_columns_and_repeats_ids_across_sources(tmp_path):
    # Search-R1's test.parquet merges FlashRAG sets and keeps their id/question/golden_answers columns; FlashRAG
    # ids repeat across sets, so the data source qualifies them. The question column wins over the prompt.
    rows = [_search_r1_row("who wrote hamlet?", ["Shakespeare"], 0, id="test_0", question="Who wrote Hamlet?",
                           golden_answers=["Shakespeare"]),
            {**_search_r1_row("capital of peru?", ["Lima"], 0, id="test_0", question="Capital of Peru?",
                              golden_answers=["Lima"]), "data_source": "triviaqa"}]
    questions = load_benchmark(_parquet(tmp_path / "test.parquet", rows), "mixed")
    assert [(q.id, q.question, q.answers, q.metadata["data_source"]) for q in questions] == [
        ("nq-test_0", "Who wrote Hamlet?", ["Shakespeare"], "nq"),
        ("triviaqa-test_0", "Capital of Peru?", ["Lima"], "triviaqa"),
    ]
    assert "golden_answers" not in questions[0].metadata and "prompt" not in questions[0].metadata


@pytest.mark.parametrize("container", ["jsonl", "parquet"])
def test_verl_rows_of_other_projects_import_answers_as_a_list_or_a_string_and_the_bare_question(tmp_path,
                                                                                                container):
    """verl files in the wild: ``ground_truth`` as a list or a plain string instead of ``{"target": [...]}``, and a
    user message that is the bare question instead of Search-R1's instruction."""
    rows = [{**_search_r1_row("unused", None, 0), "reward_model": {"style": "rule", "ground_truth": ["Paris", "paris"]},
             "prompt": [{"role": "user", "content": "What is the capital of France?"}]},
            {**_search_r1_row("Who wrote Hamlet?", None, 1), "reward_model": {"style": "rule",
                                                                              "ground_truth": ["Shakespeare"]}}]
    strings = [{**row, "reward_model": {"style": "rule", "ground_truth": answers}}
               for row, answers in zip(rows, ["Paris", "William Shakespeare"])]
    write = _parquet if container == "parquet" else _records_jsonl
    as_list = load_benchmark(write(tmp_path / f"list.{container}", rows), "v")
    as_string = load_benchmark(write(tmp_path / f"string.{container}", strings), "v")
    assert [(q.question, q.answers) for q in as_list] == [("What is the capital of France?", ["Paris", "paris"]),
                                                          ("Who wrote Hamlet?", ["Shakespeare"])]
    assert [(q.question, q.answers) for q in as_string] == [("What is the capital of France?", ["Paris"]),
                                                            ("Who wrote Hamlet?", ["William Shakespeare"])]


def test_search_r1_question_from_extra_info(tmp_path):
    row = _search_r1_row("ignored?", ["x"], 0)
    row["extra_info"]["question"] = "From extra_info?"
    assert load_benchmark(_records_jsonl(tmp_path / "r.jsonl", [row]), "r")[0].question == "From extra_info?"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"reward_model": {"ground_truth": {}}}, "'reward_model.ground_truth.target' is missing"),
        ({"reward_model": {"style": "rule"}}, "'reward_model.ground_truth' is missing"),
        ({"reward_model": {"ground_truth": {"target": []}}}, "'reward_model.ground_truth.target'"),
        ({"reward_model": {"ground_truth": {"target": [1]}}}, "'reward_model.ground_truth.target'"),
        ({"reward_model": {"ground_truth": []}}, "'reward_model.ground_truth' is an empty list"),
        ({"reward_model": {"ground_truth": 3}}, "'reward_model.ground_truth'"),
        ({"reward_model": "x"}, "'reward_model'"),
        ({"prompt": [{"role": "user", "content": "Instructions. Question:  \n"}]}, "'prompt'"),
        ({"prompt": [{"role": "system", "content": "Question: q?"}]}, "'prompt'"),
        ({"prompt": "Question: q?"}, "'prompt'"),
        ({"data_source": ""}, "'data_source'"),
    ],
)
def test_search_r1_bad_row_names_file_line_and_key(tmp_path, change, key):
    path = _records_jsonl(tmp_path / "r.jsonl", [SEARCH_R1[0], {**SEARCH_R1[1], **change}])
    _raises(["r.jsonl", "line 2", key], load_benchmark, path, "r", format="search-r1")


@pytest.mark.parametrize("missing", ["reward_model", "prompt", "data_source"])
def test_search_r1_row_missing_a_key_names_it(tmp_path, missing):
    bad = {key: value for key, value in SEARCH_R1[1].items() if key != missing}
    path = _records_jsonl(tmp_path / "r.jsonl", [SEARCH_R1[0], bad])
    _raises(["r.jsonl", "line 2", f"'{missing}' is missing"], load_benchmark, path, "r")


def test_search_r1_bad_parquet_row_is_named_by_its_row(tmp_path):
    path = _parquet(tmp_path / "r.parquet", [SEARCH_R1[0], _search_r1_row("q?", [""], 1)])
    _raises(["r.parquet", "row 1", "'reward_model.ground_truth.target'"], load_benchmark, path, "r")


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    path = _records_jsonl(tmp_path / "fake.parquet", SEARCH_R1)
    _raises(["fake.parquet", "not a readable Parquet file"], load_benchmark, path, "r")


def test_hotpotqa_answer_becomes_a_list_and_context_is_dropped(tmp_path):
    path = _json(tmp_path / "hotpot_dev.json", HOTPOTQA)
    assert load_benchmark(path, "hotpotqa", format="hotpotqa") == [
        Question("5a8b57f25542995d1e6f1371", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"],
                 {"type": "comparison", "level": "hard", "supporting_titles": ["Scott Derrickson", "Ed Wood"]}),
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
    write_jsonl(qa / "train.jsonl", [{"id": "t1", "question": "Where else?", "answers": ["Somewhere Else"]}])
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
        ("a.jsonl", R1_SEARCHER, "nq-open"),
        ("a.jsonl", SEARCH_R1, "search-r1"),
        ("a.parquet", SEARCH_R1, "search-r1"),
        ("A.JSONL", FLASHRAG, "flashrag"),  # the extension's case does not matter
    ],
)
def test_detect_format_from_extension_and_first_record(tmp_path, filename, content, expected):
    path = tmp_path / filename
    if filename.lower().endswith(".jsonl"):
        _records_jsonl(path, content)
    elif filename.endswith(".parquet"):
        _parquet(path, content)
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


def test_parquet_rows_that_fit_no_format_are_named(tmp_path):
    path = _parquet(tmp_path / "odd.parquet", [{"query": "q", "gold": "a"}])
    _raises(["odd.parquet", "row 0", "'gold'", "'query'", "search-r1"], load_benchmark, path, "x")


# --- ids -----------------------------------------------------------------------------------------


def test_ids_are_numbered_the_same_way_in_every_format(tmp_path):
    """Without ids of their own, the same two questions get ids NAME-0, NAME-1 from every format and container."""
    questions = [("Largest planet?", "Jupiter"), ("Smallest planet?", "Mercury")]
    rows = [_search_r1_row(q, [a], i) for i, (q, a) in enumerate(questions)]
    files = {
        "flashrag": _records_jsonl(tmp_path / "f.jsonl", [{"question": q, "golden_answers": [a]}
                                                          for q, a in questions]),
        "nq-open": _jsonl(tmp_path / "n.jsonl", ["", json.dumps({"question": questions[0][0], "answer": "Jupiter"}),
                                                 "", json.dumps({"question": questions[1][0], "answer": ["Mercury"]})]),
        "hotpotqa": _json(tmp_path / "h.json", [{"question": q, "answer": a, "supporting_facts": [], "context": []}
                                                for q, a in questions]),
        "json": _json(tmp_path / "j.json", [{"question": q, "answer": a} for q, a in questions]),
        "search-r1": _records_jsonl(tmp_path / "s.jsonl", rows),
        "search-r1 parquet": _parquet(tmp_path / "s.parquet", rows),
    }
    for format, path in files.items():
        loaded = load_benchmark(path, "bench", format=format.split()[0])
        assert [(q.id, q.question, q.answers) for q in loaded] == [
            ("bench-0", "Largest planet?", ["Jupiter"]), ("bench-1", "Smallest planet?", ["Mercury"])], format
    assert set(FORMATS) == {format.split()[0] for format in files}


def test_an_own_id_wins_and_a_null_one_counts_as_none(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", [{"id": 7, "question": "A?", "answer": "a"},
                                                 {"id": None, "question": "B?", "answer": "b"}])
    assert [q.id for q in load_benchmark(path, "b")] == ["7", "b-1"]


def test_a_numbered_id_that_repeats_an_own_id_is_a_duplicate(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", [{"id": "b-1", "question": "A?", "answer": "a"},
                                                 {"question": "B?", "answer": "b"}])
    _raises(["b.jsonl", "duplicate id 'b-1'", "line 1", "line 2"], load_benchmark, path, "b")


# --- a given format the file does not look like -------------------------------------------------


def test_a_search_r1_file_given_as_flashrag_says_what_it_looks_like(tmp_path):
    path = _records_jsonl(tmp_path / "nq_search.jsonl", SEARCH_R1)
    message = _raises([], load_benchmark, path, "nq", format="flashrag")
    keys = sorted(SEARCH_R1[0])
    assert message == (f"{path}: line 1: format 'flashrag' was given, but the file looks like 'search-r1' "
                       f"(its first record has keys {keys}); set format: search-r1, or auto")


@pytest.mark.parametrize(
    ("filename", "content", "given", "looks", "where"),
    [
        ("a.jsonl", NQ_OPEN, "flashrag", "nq-open", "line 1"),
        ("a.jsonl", FLASHRAG, "search-r1", "flashrag", "line 1"),
        ("a.jsonl", R1_SEARCHER, "search-r1", "nq-open", "line 1"),
        ("a.json", HOTPOTQA, "json", "hotpotqa", "record 0"),
        ("a.json", PLAIN_JSON, "hotpotqa", "json", "record 0"),
    ],
)
def test_a_given_format_the_first_record_does_not_look_like_is_named(tmp_path, filename, content, given, looks,
                                                                      where):
    path = tmp_path / filename
    if filename.endswith(".jsonl"):
        _records_jsonl(path, content)
    else:
        _json(path, content)
    _raises([f"{path}: {where}: format {given!r} was given, but the file looks like {looks!r}",
             f"set format: {looks}, or auto"], load_benchmark, path, "x", format=given)


@pytest.mark.parametrize(
    ("filename", "given", "problem", "looks", "where"),
    [
        ("a.parquet", "flashrag", "a Parquet file, not JSON Lines", "search-r1", "row 0"),
        ("a.parquet", "json", "a Parquet file, not a JSON list", "search-r1", "row 0"),
        ("a.json", "search-r1", "line 1: not valid JSON", "json", "record 0"),  # an indented JSON list as JSON lines
        ("a.jsonl", "json", "line 2: not valid JSON", "nq-open", "line 1"),  # JSON lines read as one JSON list
    ],
)
def test_a_given_format_that_cannot_read_the_file_says_what_it_looks_like(tmp_path, filename, given, problem, looks,
                                                                          where):
    path = tmp_path / filename
    if filename.endswith(".parquet"):
        _parquet(path, SEARCH_R1)
    elif filename.endswith(".jsonl"):
        _records_jsonl(path, NQ_OPEN)
    else:
        _json(path, PLAIN_JSON)
    _raises([f"{path}: {problem}", f"; the file looks like {looks!r} (its first record, {where}, has keys [",
             f"), not {given!r}: set format: {looks}, or auto"], load_benchmark, path, "x", format=given)


def test_a_search_r1_parquet_given_as_flashrag_names_the_row_and_keys(tmp_path):
    path = _parquet(tmp_path / "test.parquet", SEARCH_R1)
    message = _raises([], load_benchmark, path, "nq", format="flashrag")
    assert message == (f"{path}: a Parquet file, not JSON Lines; the file looks like 'search-r1' (its first record, "
                       f"row 0, has keys {sorted(SEARCH_R1[0])}), not 'flashrag': set format: search-r1, or auto")


def test_a_given_format_is_not_second_guessed_when_the_keys_fit_no_format(tmp_path):
    path = _records_jsonl(tmp_path / "b.jsonl", [{"id": "q1", "query": "Q?", "golden": ["a"]}])
    message = _raises(["b.jsonl", "line 1", "'golden_answers' is missing"], load_benchmark, path, "b",
                      format="flashrag")
    assert "looks like" not in message


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        ({"id": "q3", "golden_answers": ["x"]}, "'question'"),
        ({"id": "q3", "question": "   ", "golden_answers": ["x"]}, "'question'"),
        ({"id": "q3", "question": 7, "golden_answers": ["x"]}, "'question'"),
        ({"id": "q3", "question": "Q?"}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": []}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": {"a": "x"}}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": ["x", 1971]}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": [True]}, "'golden_answers'"),
        ({"id": "q3", "question": "Q?", "golden_answers": [""]}, "'golden_answers'"),
        ({"id": " ", "question": "Q?", "golden_answers": ["x"]}, "'id'"),
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
        ({"question": "Q?", "answer": " "}, "'answer'"),
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
        ({"_id": "x", "question": "Q?", "answer": [], "context": []}, "'answer'"),
        ({"_id": 1.5, "question": "Q?", "answer": "a", "context": []}, "'_id'"),
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


def test_a_byte_order_mark_at_the_start_is_read_past_as_in_the_corpus(tmp_path):
    """One rule for every text file: a UTF-8 BOM (what Windows tools write first) is dropped, in JSONL and JSON
    question files as in corpus files; one elsewhere is still an error with its line."""
    plain = _records_jsonl(tmp_path / "plain.jsonl", FLASHRAG)
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert [q.question for q in load_benchmark(marked, "b")] == [q.question for q in load_benchmark(plain, "b")]
    listed = tmp_path / "listed.json"
    listed.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"question": "Q?", "answers": ["a"]}]).encode())
    assert [q.question for q in load_benchmark(listed, "b")] == ["Q?"]
    inside = tmp_path / "inside.jsonl"
    inside.write_bytes(plain.read_bytes() + b"\xef\xbb\xbf" + json.dumps(FLASHRAG[0]).encode() + b"\n")
    with pytest.raises(BenchmarkError, match=r"inside.jsonl: line 3: not valid JSON"):
        load_benchmark(inside, "b")
