"""trec_eval semantics: our metrics agree with pytrec_eval, on hand-made runs with ties and on a real BM25 run."""

from __future__ import annotations

import json
import random

import pytest
import pytrec_eval

from searchlab.jsonl import RecordError
from searchlab.params import IndexParams
from searchlab.retrieval.beir import beir_corpus_to_jsonl, eval_retrieval, load_qrels, load_queries, retrieve_run
from searchlab.retrieval.indexing import build_index
from searchlab.retrieval.lucene import BM25Retriever
from searchlab.retrieval.metrics import evaluate_run, rank

MEASURES = ("ndcg_cut_10", "recall_100", "map", "P_5", "ndcg_cut_3")


def reference(run, qrels, measures=MEASURES):
    return pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)


def assert_agrees(ours, theirs, measures=MEASURES):
    assert set(ours["per_query"]) == set(theirs)
    for qid, values in theirs.items():
        for m in measures:
            assert ours["per_query"][qid][m] == pytest.approx(values[m], abs=1e-9), (qid, m)
    for m in measures:
        mean = sum(v[m] for v in theirs.values()) / len(theirs)
        assert round(ours[m], 4) == round(mean, 4)


def test_ties_are_broken_by_docid_descending_like_trec_eval():
    assert rank({"a": 1.0, "c": 1.0, "b": 1.0, "z": 0.5, "y": 2.0}) == ["y", "c", "b", "a", "z"]
    qrels = {"q": {"a": 1, "b": 2, "c": 0}}
    run = {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}  # all tied: trec_eval reads c, b, a
    assert_agrees(evaluate_run(run, qrels, MEASURES), reference(run, qrels))
    assert evaluate_run(run, qrels)["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_edge_queries_match_pytrec_eval():
    qrels = {"no_rel": {"a": 0}, "empty_run": {"a": 1}, "graded": {"a": 3, "b": 1, "c": -1}, "not_run": {"a": 1}}
    run = {"no_rel": {"a": 1.0}, "empty_run": {}, "graded": {"c": 3.0, "b": 2.0, "x": 1.0, "a": 0.5}, "unjudged": {"a": 1.0}}
    ours = evaluate_run(run, qrels, MEASURES)
    assert_agrees(ours, reference(run, qrels))
    assert ours["num_queries"] == 3


def test_random_runs_with_many_ties_match_pytrec_eval():
    rng = random.Random(7)
    docs = [f"d{i:02d}" for i in range(40)]
    for _ in range(30):
        qrels, run = {}, {}
        for q in range(6):
            qrels[f"q{q}"] = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 12))}
            run[f"q{q}"] = {d: float(rng.choice([1, 2, 3, round(rng.random(), 3)])) for d in rng.sample(docs, rng.randint(0, 35))}
        assert_agrees(evaluate_run(run, qrels, MEASURES), reference(run, qrels))


def test_unknown_metric_is_an_error():
    with pytest.raises(ValueError, match="unknown metric 'mrr'"):
        evaluate_run({}, {}, ("mrr",))


# ---------------------------------------------------------------- a real BEIR-format collection

TOPICS = {
    "volcano": ["lava", "eruption", "magma", "crater", "ash"],
    "ocean": ["tide", "wave", "salt", "current", "reef"],
    "music": ["melody", "rhythm", "chord", "symphony", "tempo"],
    "space": ["orbit", "planet", "comet", "galaxy", "telescope"],
    "cooking": ["recipe", "oven", "spice", "flavour", "simmer"],
}
FILLER = ["about", "people", "often", "describe", "many", "things", "with", "words", "like", "these"]


@pytest.fixture(scope="module")
def beir_collection(tmp_path_factory):
    """A BEIR folder of 60 passages over 5 topics, with exact duplicates (BM25 ties) and graded qrels."""
    rng = random.Random(3)
    root = tmp_path_factory.mktemp("beir")
    corpus, qrels = [], []
    for topic, words in TOPICS.items():
        for i in range(12):
            strength = rng.randint(0, 4)  # how many topic words the passage uses
            text = " ".join(rng.sample(words, strength) + rng.sample(FILLER, 6))
            corpus.append({"_id": f"{topic}-{i}", "title": topic.title() if i % 3 else "", "text": text})
            if strength:
                qrels.append((f"q-{topic}", f"{topic}-{i}", 2 if strength >= 3 else 1))
        corpus.append({"_id": f"{topic}-dup", "title": "", "text": corpus[-1]["text"]})  # ties with the last one
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    queries = [{"_id": f"q-{t}", "text": " ".join(w[:3])} for t, w in TOPICS.items()]
    queries.append({"_id": "q-unjudged", "text": "lava tide"})
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels))
    return root


@pytest.fixture(scope="module")
def beir_bm25(beir_collection, tmp_path_factory):
    corpus = tmp_path_factory.mktemp("beir-corpus") / "corpus.jsonl"
    assert beir_corpus_to_jsonl(beir_collection, corpus) == 65
    out = tmp_path_factory.mktemp("beir-index")
    build_index(IndexParams(threads=1), corpus, out)
    with BM25Retriever(out, threads=2) as retriever:
        yield retriever


def test_beir_files_load(beir_collection):
    assert len(load_queries(beir_collection)) == 6
    qrels = load_qrels(beir_collection)
    assert set(qrels) == {f"q-{t}" for t in TOPICS} and all(v in (1, 2) for q in qrels.values() for v in q.values())


def test_qrels_bytes_that_are_not_utf8_are_named_with_file_line_and_bytes(tmp_path):
    (tmp_path / "qrels").mkdir()
    qrels = tmp_path / "qrels" / "test.tsv"
    # past the first 8 KiB: a text stream's decoder would count bytes from the start of its chunk, with no line
    good = "".join(f"q{i}\td{i}\t1\n" for i in range(1000))
    qrels.write_bytes(("query-id\tcorpus-id\tscore\n" + good + "q9\tBeyonc\xe9\t1\n").encode("latin-1"))
    with pytest.raises(RecordError, match=rf"{qrels}:1002: not UTF-8 text: bytes b'\\xe9' at byte 10 of the line"):
        load_qrels(tmp_path)


def test_bm25_run_scores_agree_with_pytrec_eval(beir_collection, beir_bm25):
    result = eval_retrieval(beir_bm25, beir_collection, k=1000, batch_size=2)
    assert result["num_queries"] == 5 and result["k"] == 1000
    qrels = load_qrels(beir_collection)
    queries = {q: t for q, t in load_queries(beir_collection).items() if q in qrels}
    run = retrieve_run(beir_bm25, queries, k=1000)
    scores = [s for docs in run.values() for s in docs.values()]
    assert len(scores) > len(set(scores))  # the run really has ties
    theirs = reference(run, qrels, ("ndcg_cut_10", "recall_100", "map"))
    assert_agrees(result, theirs, ("ndcg_cut_10", "recall_100", "map"))
    assert 0.3 < result["ndcg_cut_10"] <= 1.0  # BM25 does find the topic passages
