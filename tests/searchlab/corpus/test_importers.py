"""Importing real corpora: JSONL(.gz), Parquet and BEIR folders, malformed records, skip mode, bad paths."""

import gzip
import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from searchlab.corpus import build_corpus
from searchlab.jsonl import RecordError
from searchlab.params import CorpusParams

RECORDS = [
    {"id": 0, "contents": '"Alpha"\nAlpha is the first letter.'},
    {"id": "d1", "title": "Beta", "text": "Beta is the second letter."},
    {"id": "d2", "title": "Gamma", "text": "Gamma is the third letter.", "extra": [1, 2]},
]
EXPECTED = [
    {"id": "0", "contents": '"Alpha"\nAlpha is the first letter.'},
    {"id": "d1", "contents": '"Beta"\nBeta is the second letter.'},
    {"id": "d2", "contents": '"Gamma"\nGamma is the third letter.'},
]


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _import(source: str, path: Path, out: Path, on_error: str = "fail", root: Path = Path("/")) -> dict:
    out.mkdir(exist_ok=True)
    return build_corpus(CorpusParams(source=source, path=str(path), on_error=on_error), root, out)


def _corpus(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------ formats
def test_jsonl_contents_and_title_text_records(tmp_path):
    src = _write_lines(tmp_path / "c.jsonl", [json.dumps(r) for r in RECORDS] + [""])
    counts = _import("jsonl", src, tmp_path / "out")
    assert counts == {"passages": 3, "skipped": 0}
    assert _corpus(tmp_path / "out") == EXPECTED
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["corpus.jsonl"]  # no kb for imports


def test_jsonl_gz_and_folder_of_shards_with_relative_path(tmp_path):
    shards = tmp_path / "data" / "wiki"
    shards.mkdir(parents=True)
    with gzip.open(shards / "part-0.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps(RECORDS[0]) + "\n")
    _write_lines(shards / "part-1.jsonl", [json.dumps(r) for r in RECORDS[1:]])
    counts = _import("jsonl", Path("data/wiki"), tmp_path / "out", root=tmp_path)
    assert counts["passages"] == 3 and _corpus(tmp_path / "out") == EXPECTED


@pytest.mark.parametrize("columns", ["contents", "title_text"])
def test_parquet_in_row_batches(tmp_path, columns, monkeypatch):
    if columns == "contents":
        table = pa.table({"id": [r["id"] for r in EXPECTED], "contents": [r["contents"] for r in EXPECTED]})
    else:
        table = pa.table({"id": [1, 2, 3], "title": ["A", None, "C"], "text": ["a text", "b text", "c text"]})
    pq.write_table(table, tmp_path / "c.parquet", row_group_size=2)
    monkeypatch.setattr("searchlab.corpus.importers._BATCH_ROWS", 2)  # several batches even for 3 rows
    counts = _import("parquet", tmp_path / "c.parquet", tmp_path / "out")
    assert counts == {"passages": 3, "skipped": 0}
    expected = EXPECTED if columns == "contents" else [
        {"id": "1", "contents": '"A"\na text'}, {"id": "2", "contents": '""\nb text'},
        {"id": "3", "contents": '"C"\nc text'}]
    assert _corpus(tmp_path / "out") == expected


def _beir(folder: Path, qrels_name: str = "test.tsv") -> Path:
    folder.mkdir()
    _write_lines(folder / "corpus.jsonl", [
        json.dumps({"_id": "doc1", "title": "Scurvy", "text": "Scurvy is caused by a lack of vitamin C."}),
        json.dumps({"_id": "doc2", "title": "", "text": "Citrus fruit is rich in vitamin C.", "metadata": {}}),
    ])
    _write_lines(folder / "queries.jsonl", [
        json.dumps({"_id": "q1", "text": "what causes scurvy", "metadata": {"split": "test"}}),
        json.dumps({"_id": "q2", "text": "which fruit has vitamin c"}),
    ])
    (folder / "qrels").mkdir()
    _write_lines(folder / "qrels" / qrels_name, ["query-id\tcorpus-id\tscore", "q1\tdoc1\t1", "q2\tdoc2\t1"])
    return folder


def test_beir_folder_writes_corpus_queries_and_qrels(tmp_path):
    src = _beir(tmp_path / "scifact")
    counts = _import("beir", src, tmp_path / "out")
    assert counts == {"passages": 2, "skipped": 0, "queries": 2, "qrels": 2}
    out = tmp_path / "out"
    assert _corpus(out) == [
        {"id": "doc1", "contents": '"Scurvy"\nScurvy is caused by a lack of vitamin C.'},
        {"id": "doc2", "contents": '""\nCitrus fruit is rich in vitamin C.'},
    ]
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert queries == [json.loads(line) for line in (src / "queries.jsonl").read_text().splitlines()]
    assert (out / "qrels.tsv").read_text() == (src / "qrels" / "test.tsv").read_text()
    assert not (out / "kb.jsonl").exists()


def test_beir_falls_back_to_dev_qrels(tmp_path):
    src = _beir(tmp_path / "nfc", qrels_name="dev.tsv")
    counts = _import("beir", src, tmp_path / "out")
    assert counts["qrels"] == 2
    assert (tmp_path / "out" / "qrels.tsv").read_text() == (src / "qrels" / "dev.tsv").read_text()


def test_beir_without_qrels_is_a_clear_error(tmp_path):
    src = _beir(tmp_path / "b")
    (src / "qrels" / "test.tsv").unlink()
    with pytest.raises(FileNotFoundError, match="qrels"):
        _import("beir", src, tmp_path / "out")


# ------------------------------------------------------------------ malformed records
GOOD = json.dumps({"id": "ok", "contents": '"Ok"\nfine'})
BAD_LINES = {
    "not json": ("{id: 1,", "not valid JSON"),
    "missing id": (json.dumps({"contents": '"X"\nx'}), "missing or invalid 'id'"),
    "missing contents": (json.dumps({"id": "x", "title": "X"}), "neither 'contents' nor 'text'"),
    "empty contents": (json.dumps({"id": "x", "contents": "  "}), "empty 'contents'"),
    "non-string text": (json.dumps({"id": "x", "title": "X", "text": 42}), "'text' of 'x' is not a string"),
    "duplicate id": (GOOD, "duplicate id 'ok'"),
    "not an object": ("[1, 2]", "expected a JSON object"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_malformed_record_names_file_and_line(tmp_path, case):
    bad, problem = BAD_LINES[case]
    src = _write_lines(tmp_path / "c.jsonl", [GOOD, "", bad, GOOD.replace('"ok"', '"ok2"')])
    with pytest.raises(RecordError) as err:
        _import("jsonl", src, tmp_path / "out")
    assert str(err.value).startswith(f"{src}:3: ") and problem in str(err.value)


def test_skip_mode_counts_and_logs_malformed_records(tmp_path, caplog):
    lines = [GOOD] + [bad for bad, _ in BAD_LINES.values()] + [json.dumps({"id": 7, "title": "T", "text": "t"})]
    src = _write_lines(tmp_path / "c.jsonl", lines)
    with caplog.at_level(logging.WARNING, logger="searchlab.corpus.importers"):
        counts = _import("jsonl", src, tmp_path / "out", on_error="skip")
    assert counts == {"passages": 2, "skipped": len(BAD_LINES)}
    assert [p["id"] for p in _corpus(tmp_path / "out")] == ["ok", "7"]
    assert f"{src}:2: not valid JSON" in caplog.text and f"{src}:7: duplicate id 'ok'" in caplog.text


def test_parquet_bad_row_names_file_and_row_and_can_be_skipped(tmp_path):
    table = pa.table({"id": ["a", None, "c", "a"], "contents": ['"A"\na', '"B"\nb', "", '"A"\nagain']})
    pq.write_table(table, tmp_path / "c.parquet")
    with pytest.raises(RecordError) as err:
        _import("parquet", tmp_path / "c.parquet", tmp_path / "out")
    assert str(err.value).startswith(f"{tmp_path / 'c.parquet'}:2: row 2: missing or invalid 'id'")
    counts = _import("parquet", tmp_path / "c.parquet", tmp_path / "out2", on_error="skip")
    assert counts == {"passages": 1, "skipped": 3}


def test_beir_skip_mode_covers_corpus_queries_and_qrels(tmp_path):
    src = _beir(tmp_path / "b")
    with open(src / "corpus.jsonl", "a") as f:
        f.write(json.dumps({"_id": "doc3", "title": "No text"}) + "\n")
    with open(src / "queries.jsonl", "a") as f:
        f.write("{broken\n")
    with open(src / "qrels" / "test.tsv", "a") as f:
        f.write("q1\tdoc2\tmaybe\n")
    with pytest.raises(RecordError, match=r"corpus\.jsonl:3: "):
        _import("beir", src, tmp_path / "out")
    counts = _import("beir", src, tmp_path / "out2", on_error="skip")
    assert counts == {"passages": 2, "skipped": 3, "queries": 2, "qrels": 2}


# ------------------------------------------------------------------ unusable inputs
def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope.jsonl")):
        _import("jsonl", tmp_path / "nope.jsonl", tmp_path / "out")


@pytest.mark.parametrize("lines", [[], ["", "  "], ["{bad", json.dumps({"id": "x", "contents": ""})]])
def test_empty_corpus_is_an_error_even_in_skip_mode(tmp_path, lines):
    src = _write_lines(tmp_path / "c.jsonl", lines)
    with pytest.raises(ValueError, match=f"{src}: no valid passages"):
        _import("jsonl", src, tmp_path / "out", on_error="skip")


def test_unreadable_files_are_clear_errors(tmp_path):
    fake_gz = tmp_path / "c.jsonl.gz"
    fake_gz.write_text(GOOD + "\n")  # plain text under a .gz name
    with pytest.raises(ValueError, match=f"{fake_gz}: cannot read"):
        _import("jsonl", fake_gz, tmp_path / "out")
    fake_parquet = tmp_path / "c.parquet"
    fake_parquet.write_text("id,contents\n1,x\n")
    with pytest.raises(ValueError, match=f"{fake_parquet}: cannot read as Parquet"):
        _import("parquet", fake_parquet, tmp_path / "out2")
    pq.write_table(pa.table({"doc": ["1"], "body": ["x"]}), tmp_path / "cols.parquet")
    with pytest.raises(ValueError, match="needs columns id"):
        _import("parquet", tmp_path / "cols.parquet", tmp_path / "out3")


def test_invalid_utf8_line_is_a_record_error(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_bytes(GOOD.encode() + b"\n" + b'{"id": "x", "contents": "\xff\xfe"}\n')
    with pytest.raises(RecordError, match=f"{src}:2: not UTF-8 text: bytes b'\\\\xff' at byte 26 of the line"):
        _import("jsonl", src, tmp_path / "out")


def test_qrels_bytes_that_are_not_utf8_name_line_and_bytes_and_can_be_skipped(tmp_path):
    src = _beir(tmp_path / "b")
    with open(src / "qrels" / "test.tsv", "ab") as f:
        f.write("q1\tBeyonc\xe9\t1\n".encode("latin-1"))
    qrels = src / "qrels" / "test.tsv"
    with pytest.raises(RecordError, match=f"{qrels}:4: not UTF-8 text: bytes b'\\\\xe9' at byte 10 of the line"):
        _import("beir", src, tmp_path / "out")
    counts = _import("beir", src, tmp_path / "out2", on_error="skip")
    assert counts["qrels"] == 2 and counts["skipped"] == 1
