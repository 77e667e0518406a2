"""BEIR test collections: read one, turn its corpus into ours, and score a retriever on it.

A BEIR folder holds ``corpus.jsonl`` (``{"_id", "title", "text"}``),
``queries.jsonl`` (``{"_id", "text"}``) and ``qrels/<split>.tsv`` (a header line,
then ``query-id  corpus-id  score``).

>>> n = beir_corpus_to_jsonl(Path("scifact"), Path("corpus.jsonl"))  # doctest: +SKIP
>>> build_index(IndexParams(), Path("corpus.jsonl"), Path("scifact-index"))  # doctest: +SKIP
>>> with BM25Retriever(Path("scifact-index")) as r:  # doctest: +SKIP
...     eval_retrieval(r, Path("scifact"))["ndcg_cut_10"]
0.679
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from searchlab.jsonl import RecordError, iter_jsonl, read_lines
from searchlab.progress import counter
from searchlab.retrieval.base import Retriever
from searchlab.retrieval.metrics import DEFAULT_METRICS, evaluate_run


def beir_documents(beir_dir: Path) -> Iterator[dict]:
    """The corpus as our records: ``{"id", "contents": "\\"Title\\"\\ntext"}`` (just the text when untitled)."""
    path = Path(beir_dir) / "corpus.jsonl"
    for line, record in iter_jsonl(path):
        if not isinstance(record, dict) or "_id" not in record:
            raise RecordError(path, line, "a BEIR corpus record needs '_id', 'title' and 'text'")
        title, text = (record.get("title") or "").strip(), record.get("text") or ""
        yield {"id": str(record["_id"]), "contents": f'"{title}"\n{text}' if title else text}


def beir_corpus_to_jsonl(beir_dir: Path, out_path: Path) -> int:
    """Write the BEIR corpus in searchlab's corpus format (ready for ``build_index``); return the count."""
    from searchlab.jsonl import write_jsonl

    return write_jsonl(out_path, beir_documents(beir_dir))


def load_queries(beir_dir: Path) -> dict[str, str]:
    """Query id → query text."""
    path = Path(beir_dir) / "queries.jsonl"
    queries = {}
    for line, record in iter_jsonl(path):
        if not isinstance(record, dict) or "_id" not in record or not isinstance(record.get("text"), str):
            raise RecordError(path, line, "a BEIR query record needs '_id' and a string 'text'")
        queries[str(record["_id"])] = record["text"]
    return queries


def load_qrels(beir_dir: Path, split: str = "test") -> dict[str, dict[str, int]]:
    """Query id → document id → relevance judgement, from ``qrels/<split>.tsv``.

    A folder without ``qrels/`` but with a single ``qrels.tsv`` (what the corpus
    stage keeps of an imported BEIR collection) is read from that file.
    """
    path = Path(beir_dir) / "qrels" / f"{split}.tsv"
    if not path.exists() and (Path(beir_dir) / "qrels.tsv").exists():
        path = Path(beir_dir) / "qrels.tsv"
    if not path.exists():
        raise FileNotFoundError(f"{beir_dir}: no qrels/{split}.tsv (nor qrels.tsv); is this a BEIR folder?")
    qrels: dict[str, dict[str, int]] = {}
    # Decoded line by line (not as one stream) so that bytes that are not UTF-8 are named with their line.
    rows = csv.reader((line for _, line in read_lines(path)), delimiter="\t")
    for row in rows:
        number = rows.line_num
        if not row or (number == 1 and not row[-1].lstrip("-").isdigit()):
            continue  # blank line, or the "query-id corpus-id score" header
        if len(row) < 3:
            raise RecordError(path, number, f"expected query-id, corpus-id and score, got {row!r}")
        try:
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
        except ValueError:
            raise RecordError(path, number, f"score must be an integer, got {row[2]!r}") from None
    return qrels


def retrieve_run(retriever: Retriever, queries: dict[str, str], k: int, batch_size: int = 256) -> dict[str, dict[str, float]]:
    """Query id → {document id: score} for the top ``k`` of each query, searched in batches."""
    qids = list(queries)
    run: dict[str, dict[str, float]] = {}
    with counter(total=len(qids), desc="retrieve", unit="query") as bar:
        for start in range(0, len(qids), batch_size):
            batch = qids[start : start + batch_size]
            for qid, hits in zip(batch, retriever.search([queries[q] for q in batch], k)):
                scores: dict[str, float] = {}
                for hit in hits:
                    scores.setdefault(hit.id, hit.score)  # a repeated id keeps its best (first) score
                run[qid] = scores
            bar.update(len(batch))
    return run


# more judged documents than this share missing from the index: it indexes another collection
MAX_MISSING_JUDGED = 0.1


def check_judged_documents(qrels: dict[str, dict[str, int]], indexed_corpus: Path, beir_dir: Path) -> None:
    """ValueError when more than :data:`MAX_MISSING_JUDGED` of the documents ``qrels`` judges are not in
    ``indexed_corpus`` (the corpus file the index was built from): scores would be a silent zero."""
    judged = {doc for docs in qrels.values() for doc in docs}
    found = {str(record.get("id")) for _, record in iter_jsonl(indexed_corpus)} & judged
    missing = len(judged) - len(found)
    if judged and missing / len(judged) > MAX_MISSING_JUDGED:
        raise ValueError(
            f"{missing} of the {len(judged)} documents {beir_dir} judges are not in the index (built from "
            f"{indexed_corpus}): it indexes another collection, so every score would be about 0. Import the "
            f"collection as the corpus first: searchlab run index --set corpus.source=beir --set "
            f"corpus.path={beir_dir}")


def eval_retrieval(
    retriever: Retriever,
    beir_dir: Path,
    k: int = 1000,
    batch_size: int = 256,
    split: str = "test",
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    indexed_corpus: Path | None = None,
) -> dict:
    """Search every judged query of a BEIR collection and score the run with trec_eval semantics.

    ``retriever`` must search an index of this collection's corpus; with
    ``indexed_corpus`` (the corpus file that index was built from) that is
    checked first (:func:`check_judged_documents`). Returns
    :func:`~searchlab.retrieval.metrics.evaluate_run`'s dict (means,
    ``num_queries``, ``per_query``) plus ``k`` and ``split``.
    """
    beir_dir = Path(beir_dir)
    qrels = load_qrels(beir_dir, split)
    if indexed_corpus is not None:
        check_judged_documents(qrels, indexed_corpus, beir_dir)
    all_queries = load_queries(beir_dir)
    missing = sorted(set(qrels) - set(all_queries))
    if missing:
        raise ValueError(f"{beir_dir}: {len(missing)} judged queries are not in queries.jsonl (e.g. {missing[:3]})")
    queries = {qid: all_queries[qid] for qid in qrels}
    result = evaluate_run(retrieve_run(retriever, queries, k, batch_size), qrels, metrics)
    result.update(k=k, split=split)
    return result
