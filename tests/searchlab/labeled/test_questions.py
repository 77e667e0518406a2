"""Training questions read from labeled files (qa.source: files): the formats evaluation reads, the leakage check
against the evaluated benchmarks, the seeded dev split, and the schema the training stages read."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from searchlab.jsonl import read_jsonl
from searchlab.labeled.questions import OverlapError, import_questions, is_dev
from searchlab.questions.config import QuestionFileParams
from searchlab.questions.formats import load_benchmark
from searchlab.questions.record import ABSENT, QuestionRecord
from searchlab.synth.config import QAParams

PROMPT = "Answer the given question. ... For example, <answer> Beijing </answer>. Question: {q}\n"


def _verl(path: Path, rows: list[tuple[str, list[str]]]) -> Path:
    """Search-R1's verl rows in Parquet, as its data scripts write them."""
    pq.write_table(pa.Table.from_pylist([
        {"id": f"train_{i}", "data_source": "nq", "prompt": [{"role": "user", "content": PROMPT.format(q=q)}],
         "ability": "fact-reasoning", "reward_model": {"style": "rule", "ground_truth": {"target": a}},
         "extra_info": {"split": "train", "index": i}} for i, (q, a) in enumerate(rows)]), path)
    return path


def _flashrag(path: Path, rows: list[tuple[str, str, list[str]]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "question": q, "golden_answers": a}) + "\n" for i, q, a in rows))
    return path


TRAIN = [(f"What is the capital of country {n}?", [f"City {n}"]) for n in range(40)]


def _qa(**changes) -> QAParams:
    return QAParams(source="files", files={"nq": QuestionFileParams(path="train.parquet")}, dev_share=0.2, **changes)


def test_questions_import_with_the_overlap_dropped_and_reported_per_pair(tmp_path):
    _verl(tmp_path / "train.parquet", TRAIN)
    # one question the same up to case and punctuation, one by id (Search-R1 prefixes ids with the data source)
    _flashrag(tmp_path / "test.jsonl", [("t0", "what is the CAPITAL of country 3", ["City 3"]),
                                        ("nq-train_7", "A question worded otherwise?", ["City 7"]),
                                        ("t2", "Unrelated?", ["x"])])
    _flashrag(tmp_path / "other.jsonl", [("o0", "Nothing shared?", ["y"])])
    benchmarks = {"test": QuestionFileParams(path="test.jsonl"), "other": QuestionFileParams(path="other.jsonl")}
    out = tmp_path / "qa"
    out.mkdir()
    counts = import_questions(_qa(), benchmarks, tmp_path, out)
    assert counts["read"] == 40 and counts["overlap_dropped"] == 2
    assert counts["overlap.nq.test"] == 2 and counts["overlap.nq.other"] == 0
    train, dev = read_jsonl(out / "train.jsonl"), read_jsonl(out / "dev.jsonl")
    assert len(train) + len(dev) == 38 and 0 < len(dev) < 38
    kept = {q["question"] for q in train + dev}
    assert "What is the capital of country 3?" not in kept and "What is the capital of country 7?" not in kept
    assert read_jsonl(out / "heldout.jsonl") == []
    first = train[0]
    assert first["type"] == "nq" and first["evidence"] is None and first["features"] == {"bucket": None}
    assert first["question"].startswith("What is the capital") and first["answers"][0].startswith("City")
    report = json.loads((out / "overlap.json").read_text())
    pair = {(p["train"], p["benchmark"]): p for p in report["pairs"]}[("nq", "test")]
    assert (pair["overlap"], pair["by_text"], pair["by_id"]) == (2, 1, 1)
    assert "| nq | test | 40 | 3 | 2 | 1 | 1 |" in (out / "datasheet.md").read_text()
    # the split is a function of the question alone: the same questions in another order split the same way
    _verl(tmp_path / "train.parquet", TRAIN[::-1])
    again = tmp_path / "again"
    again.mkdir()
    import_questions(_qa(), benchmarks, tmp_path, again)
    assert {q["question"] for q in read_jsonl(again / "dev.jsonl")} == {q["question"] for q in dev}
    assert all(is_dev(q["question"], 0, 0.2) for q in dev)


def test_on_overlap_fail_names_the_pair_and_a_question(tmp_path):
    _verl(tmp_path / "train.parquet", TRAIN)
    _flashrag(tmp_path / "test.jsonl", [("t0", "What is the capital of country 5?", ["City 5"])])
    with pytest.raises(OverlapError, match=r"qa.files.nq are in eval.benchmarks.test .*country 5"):
        import_questions(_qa(on_overlap="fail"), {"test": QuestionFileParams(path="test.jsonl")}, tmp_path, tmp_path)


def test_a_bad_training_file_is_named_by_key_file_line_and_key(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"question": "Q?", "golden_answers": ["a"]}\n{"question": "R?"}\n')
    qa = QAParams(source="files", files={"mine": QuestionFileParams(path="train.jsonl")})
    with pytest.raises(ValueError, match=r"qa.files.mine: .*train.jsonl: line 2: key 'golden_answers' is missing"):
        import_questions(qa, {}, tmp_path, tmp_path)


def test_a_record_reads_back_every_field_in_the_key_order_it_was_written(tmp_path):
    synthesized = {"id": "bridge-e7-1", "type": "bridge", "question": "Which river flows through Ana's town?",
                   "answers": ["Nal River"], "answer_entity": None, "slot": {"predicate": "river"}, "hops": 2,
                   "constraints": [{"text": "born in", "op": "hop", "via": None}], "evidence": ["e7-0", "e8-1"],
                   "mentions": ["e7"], "compare": None, "features": {"bucket": "medium", "answer_rank": 4}}
    imported = {"id": "nq-train_0", "type": "nq", "question": "Wo liegt Köln?", "answers": ["NRW"], "evidence": None,
                "features": {"bucket": None}, "source": "nq", "metadata": {"data_source": "nq"}}
    for line in (synthesized, imported):
        record = QuestionRecord.from_json(line)
        assert record.to_json() == line and list(record.to_json()) == list(line)  # None kept, ABSENT left out
        assert QuestionRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert QuestionRecord.from_json(imported).hops is ABSENT and QuestionRecord.from_json(synthesized).compare is None
    # a suite line is read back by evaluation's reader into an equal record
    suite = QuestionRecord("s-1", "Capital of France?", ["Paris"], {"type": "single", "evidence": None})
    (tmp_path / "suite.jsonl").write_text(json.dumps(suite.to_flashrag()) + "\n")
    assert load_benchmark(tmp_path / "suite.jsonl", "suite") == [suite]


def test_labeled_questions_become_demonstrations_where_their_search_finds_a_gold_answer(tmp_path, bm25):
    from searchlab.agent.protocol import parse_trajectory
    from searchlab.labeled.demos import SEARCH_THINK

    # the real BM25 index over the toy passages: Warsaw's passage holds the answer as "Poland"; nothing names
    # the Amazon; the third question contains its own answer
    _flashrag(tmp_path / "train.jsonl", [(0, "Where was Marie Curie born, in which country?", ["poland"]),
                                         (1, "Which river flows through Manaus?", ["the Amazon"]),
                                         (2, "Is Oslo the capital of Norway, or is Oslo not?", ["Oslo"]),
                                         (3, "Who discovered penicillin?", ["Alexander Fleming"])])
    qa = QAParams(source="files", files={"mine": QuestionFileParams(path="train.jsonl")}, dev_share=0.0)
    out = tmp_path / "qa"
    out.mkdir()
    counts = import_questions(qa, {}, tmp_path, out, bm25)
    assert (counts["demos"], counts["demo_share"]) == (2, 0.5)
    assert (counts["no_demo.not_retrieved"], counts["no_demo.answer_in_question"]) == (1, 1)
    demos = {d["question"]: d for d in read_jsonl(out / "demos.jsonl")}
    curie = demos["Where was Marie Curie born, in which country?"]
    assert (curie["role"], curie["split"], curie["type"], curie["answers"]) == ("solver", "train", "mine", ["poland"])
    assert curie["id"] == read_jsonl(out / "train.jsonl")[0]["id"]
    # the agent protocol reads it back: one search with the question as written, then the answer as the passage
    # writes it
    trajectory = parse_trajectory(curie["completion"])
    assert trajectory.searches == [curie["question"]] and trajectory.answer == "Poland"
    assert SEARCH_THINK in curie["completion"] and "Warsaw is the capital of Poland" in curie["completion"]
    assert demos["Who discovered penicillin?"]["completion"].endswith("<answer> Alexander Fleming </answer>")
    assert "Demonstrations: 2 of the 4 train and dev questions (50%;" in (out / "datasheet.md").read_text()


def test_a_multi_hop_question_s_demonstration_searches_its_supporting_titles_next(tmp_path, bm25):
    from searchlab.agent.protocol import parse_trajectory

    # HotpotQA's own format: the question's search (one passage a search) finds Curie's passage, which does not say
    # where she was born; the supporting titles lead to Warsaw's, which does
    records = [{"_id": "h1", "question": "The scientist who researched radioactivity was born in the capital of "
                                         "which country?", "answer": "Poland", "type": "bridge", "level": "easy",
                "supporting_facts": [["Marie Curie", 0], ["Warsaw", 0]], "context": []},
               {"_id": "h2", "question": "Which board game do two players play?", "answer": "Chess",
                "supporting_facts": [["Chess", 0]], "context": []}]  # its answer comes with the first search
    (tmp_path / "hotpot.json").write_text(json.dumps(records))
    qa = QAParams(source="files", files={"hotpot": QuestionFileParams(path="hotpot.json")}, dev_share=0.0,
                  demos={"topk": 1})
    out = tmp_path / "qa"
    out.mkdir()
    counts = import_questions(qa, {}, tmp_path, out, bm25)
    assert (counts["demos"], counts["demos_with_follow_up"]) == (2, 1)
    demos = {d["id"]: d for d in read_jsonl(out / "demos.jsonl")}
    assert parse_trajectory(demos["h2"]["completion"]).searches == [records[1]["question"]]  # found at once
    # Curie's passage came with the question's own search: her title is not searched again
    trajectory = parse_trajectory(demos["h1"]["completion"])
    assert trajectory.searches == [records[0]["question"], "Warsaw"] and trajectory.answer == "Poland"
    assert "1 after searching a supporting title" in (out / "datasheet.md").read_text()
    # a demonstration takes at most qa.demos.max_searches searches: with one, the bridge question yields none
    one = qa.model_copy(update={"demos": qa.demos.model_copy(update={"max_searches": 1})})
    counts = import_questions(one, {}, tmp_path, out, bm25)
    assert (counts["demos"], counts["demos_with_follow_up"], counts["no_demo.not_retrieved"]) == (1, 0, 1)
