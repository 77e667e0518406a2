"""`searchlab eval-retrieval` on a BEIR collection imported as the corpus agrees with pytrec_eval."""

from __future__ import annotations

import pytest

import json

import pytrec_eval

from tests.conftest import make_project, run_cli

DOCS = {
    "d1": ("Amber Lake", "Amber Lake is a glacial lake fed by the Orrin river."),
    "d2": ("Orrin River", "The Orrin river flows from the Kessel mountains into Amber Lake."),
    "d3": ("Kessel Mountains", "The Kessel mountains are a granite range with glaciers."),
    "d4": ("Tova Brenn", "Tova Brenn was a chemist who studied glacial meltwater."),
    "d5": ("Brenn Institute", "The Brenn Institute was founded by Tova Brenn to study lakes."),
    "d6": ("Selm Harbour", "Selm Harbour is a fishing port on a cold bay."),
    "d7": ("Harbour fishing", "Fishing boats leave the harbour at dawn in winter."),
    "d8": ("Granite", "Granite is a coarse rock common in mountain ranges."),
}
QUERIES = {"q1": "which river flows into Amber Lake", "q2": "who founded the Brenn Institute",
           "q3": "granite mountain range glaciers", "q4": "fishing port harbour"}
QRELS = {"q1": {"d2": 2, "d1": 1}, "q2": {"d5": 2, "d4": 2}, "q3": {"d3": 2, "d8": 1}, "q4": {"d6": 2, "d7": 1}}


@pytest.mark.slow
def test_beir_import_index_and_eval_match_pytrec_eval(prefect_server, tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, (t, x) in DOCS.items()))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (beir / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, docs in QRELS.items() for d, r in docs.items()))
    project = make_project(tmp_path / "project")
    source = ["--set", "corpus.source=beir", "--set", f"corpus.path={beir}"]
    run_cli(project, "run", "index", "--params", "params/smoke.yaml", *source)

    ours = json.loads(run_cli(project, "eval-retrieval", "--params", "params/smoke.yaml", "--json").stdout)

    hits = {}
    for qid, text in QUERIES.items():
        found = json.loads(run_cli(project, "search", text, "--params", "params/smoke.yaml", "--json", "-k", "100").stdout)
        hits[qid] = {h["id"]: h["score"] for h in found}
    reference = pytrec_eval.RelevanceEvaluator(QRELS, {"ndcg_cut.10", "recall.100", "map"}).evaluate(hits)
    for ours_name, ref_name in (("ndcg_cut_10", "ndcg_cut_10"), ("recall_100", "recall_100"), ("map", "map")):
        expected = sum(r[ref_name] for r in reference.values()) / len(reference)
        assert round(ours[ours_name], 4) == round(expected, 4), ours_name
    assert ours["ndcg_cut_10"] > 0.5  # BM25 finds these easy relevant documents

    # another collection's qrels against this index: an error naming the count, not a silent 0.0000
    other = tmp_path / "other"
    (other / "qrels").mkdir(parents=True)
    (other / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "granite"}) + "\n")
    (other / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tx1\t1\nq1\tx2\t1\n")
    bad = run_cli(project, "eval-retrieval", str(other), "--params", "params/smoke.yaml", check=False)
    assert bad.returncode == 2 and "2 of the 2 documents" in bad.stderr and "corpus.source=beir" in bad.stderr
