"""Index building: the real subprocess build, its layout and summary, and how bad corpora fail."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from searchlab.jsonl import RecordError, read_jsonl
from searchlab.params import IndexParams
from searchlab.retrieval.docstore import DocStore
from searchlab.retrieval.indexing import IndexBuildError, build_index
from searchlab.retrieval.ingest import ingest_corpus

from .conftest import DOCS, contents, write_corpus


def test_build_summary_counts_every_document(built_index):
    out, summary = built_index
    assert summary["documents"] == len(DOCS)
    assert summary["dense_documents"] == len(DOCS)
    assert summary["bm25"]["indexed"] == len(DOCS) and summary["bm25"]["errors"] == 0
    assert summary["dense"]["encoder"] == "minilm" and summary["dense"]["dim"] == 384
    info = json.loads((out / "index_info.json").read_text())
    assert info == {k: v for k, v in summary.items() if k not in ("bytes", "timings")}  # no measurement in the file
    assert summary["bm25"]["statistics"]["documents"] == len(DOCS) and summary["bm25"]["statistics"]["unique_terms"] > 0
    assert set(summary["bytes"]) == {"bm25", "dense", "docstore"} and all(summary["bytes"].values())
    assert not (out / "_shards").exists()  # the scratch input for Anserini is gone


def test_docstore_and_row_map_cover_the_corpus(index_dir):
    store = DocStore(index_dir / "docstore")
    try:
        assert {store.get(row) for row in range(len(store))} == {(i, contents(i)) for i in DOCS}
    finally:
        store.close()
    rows = np.load(index_dir / "bm25" / "rows.npy")
    assert sorted(rows.tolist()) == list(range(len(DOCS)))  # every Lucene doc maps to a distinct row


def test_blank_passages_are_skipped_and_counted(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", [
        {"id": "a", "contents": '"A"\nalpha text'},
        {"id": "b", "contents": "   \n "},
        {"id": 7, "contents": '"Seven"\nan integer id', "extra": "ignored"},
    ])
    result = ingest_corpus(corpus, tmp_path / "docstore", tmp_path / "shards", n_shards=2)
    assert result.rows == {"a": 0, "7": 1} and result.skipped_empty == 1
    shards = [r for p in result.shards for r in read_jsonl(p)]
    assert sorted(r["id"] for r in shards) == ["7", "a"]


@pytest.mark.parametrize("records, problem", [
    ([{"id": "a", "contents": "x"}, {"id": "a", "contents": "y"}], "duplicate id 'a' (first seen on line 1)"),
    ([{"id": "a"}], "'contents' must be a string"),
    ([{"contents": "x"}], "'id' must be a non-empty string"),
    ([["a", "x"]], "expected an object"),
])
def test_bad_records_name_the_line(tmp_path, records, problem):
    corpus = write_corpus(tmp_path / "c.jsonl", [{"id": "ok", "contents": "fine"}, *records])
    with pytest.raises(RecordError) as err:
        ingest_corpus(corpus, tmp_path / "docstore", tmp_path / "shards", n_shards=1)
    assert problem.replace("line 1", "line 2") in str(err.value)
    assert str(err.value).startswith(f"{corpus}:{1 + len(records)}:")


def test_build_failure_in_the_subprocess_reaches_the_caller(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "contents": "fine"}\nnot json\n')
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(IndexBuildError, match=r"c\.jsonl:2: not valid JSON"):
        build_index(IndexParams(), corpus, out)


def test_missing_inputs_are_clear_errors(tmp_path):
    with pytest.raises(IndexBuildError, match="does not exist"):
        build_index(IndexParams(), tmp_path / "nope.jsonl", tmp_path)
    corpus = write_corpus(tmp_path / "c.jsonl", [{"id": "a", "contents": "x"}])
    with pytest.raises(IndexBuildError, match="output folder"):
        build_index(IndexParams(), corpus, tmp_path / "missing")


BUILD_IN_CHILD = """
import sys
from pathlib import Path
from searchlab.params import IndexParams
from searchlab.retrieval.indexing import build_index
summary = build_index(IndexParams(threads=1), Path(sys.argv[1]), Path(sys.argv[2]))
print(summary["documents"], "jnius" in sys.modules, "torch" in sys.modules, flush=True)
"""


def test_the_caller_never_starts_java(tmp_path, corpus_file):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", BUILD_IN_CHILD, str(corpus_file), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(len(DOCS)), "False", "False"]


def test_killing_the_caller_stops_the_build(tmp_path):
    corpus = tmp_path / "big.jsonl"
    with open(corpus, "w") as f:
        for i in range(300_000):
            f.write(json.dumps({"id": f"d{i}", "contents": f'"Doc {i}"\nword{i % 997} word{i % 991} filler text'}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    caller = subprocess.Popen([sys.executable, "-c", BUILD_IN_CHILD, str(corpus), str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    workers = []
    while not workers:
        assert time.time() < deadline and caller.poll() is None, "the build worker never started"
        workers = [p for p in psutil.Process(caller.pid).children() if "build_worker" in " ".join(p.cmdline())]
        time.sleep(0.05)
    time.sleep(0.5)  # let it get going
    caller.kill()  # SIGKILL: the caller gets no chance to clean up
    caller.wait()
    gone, alive = psutil.wait_procs(workers, timeout=3)  # the build itself takes far longer
    assert not alive, "the build worker outlived its killed caller"
