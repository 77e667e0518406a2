"""Read and check the corpus once, writing the document store and Anserini's input shards.

The corpus is Search-R1/FlashRAG JSONL: one ``{"id": ..., "contents": "\\"Title\\"\\ntext"}``
per line (other keys are ignored; an integer id is read as its decimal string).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from searchlab.jsonl import RecordError, iter_jsonl
from searchlab.progress import track
from searchlab.retrieval.docstore import DocStoreWriter

SHARD_BLOCK = 1024  # consecutive documents per shard turn: shards stay balanced, files are written in long runs


@dataclass
class IngestResult:
    """What :func:`ingest_corpus` wrote: row of each id, counts, and the shard files for Anserini."""

    rows: dict[str, int]
    skipped_empty: int
    shards: list[Path] = field(default_factory=list)

    @property
    def documents(self) -> int:
        return len(self.rows)


def count_lines(path: Path) -> int:
    """Number of lines in a file, read in large binary blocks (a progress bar total; ~1 s per GB)."""
    count = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            count += block.count(b"\n")
    return count


def ingest_corpus(corpus_jsonl: Path, docstore_dir: Path, shards_dir: Path, n_shards: int) -> IngestResult:
    """Check every record, store it in ``docstore_dir`` and spread it over ``n_shards`` JSONL files.

    Returns the row of each document id. A record that is not an object with a
    string (or integer) ``id`` and a string ``contents``, or whose id repeats an
    earlier one, raises :class:`~searchlab.jsonl.RecordError` naming file and line;
    a record whose contents are blank is skipped and counted (Anserini could not
    index it, and an empty passage is no answer to anything).
    """
    shards_dir.mkdir(parents=True, exist_ok=True)
    shard_paths = [shards_dir / f"part-{i:03d}.jsonl" for i in range(n_shards)]
    shard_files = [open(p, "wb") for p in shard_paths]
    rows: dict[str, int] = {}
    line_of_row = array("Q")  # for the duplicate-id message; 8 bytes a row instead of a second dict
    skipped = 0
    try:
        with DocStoreWriter(docstore_dir) as store:
            records = iter_jsonl(corpus_jsonl)
            for line, record in track(records, total=count_lines(corpus_jsonl), desc="corpus", unit="doc"):
                doc_id, contents = _check(corpus_jsonl, line, record)
                if not contents.strip():
                    skipped += 1
                    continue
                if doc_id in rows:
                    raise RecordError(corpus_jsonl, line, f"duplicate id {doc_id!r} (first seen on line {line_of_row[rows[doc_id]]})")
                row = store.add(doc_id, contents)
                rows[doc_id] = row
                line_of_row.append(line)
                shard = shard_files[(row // SHARD_BLOCK) % n_shards]
                shard.write(orjson.dumps({"id": doc_id, "contents": contents}) + b"\n")
    finally:
        for f in shard_files:
            f.close()
    return IngestResult(rows=rows, skipped_empty=skipped, shards=shard_paths)


def _check(path: Path, line: int, record) -> tuple[str, str]:
    if not isinstance(record, dict):
        raise RecordError(path, line, f"expected an object with 'id' and 'contents', got {type(record).__name__}")
    doc_id = record.get("id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id:
        raise RecordError(path, line, f"'id' must be a non-empty string, got {record.get('id')!r}")
    contents = record.get("contents")
    if not isinstance(contents, str):
        raise RecordError(path, line, f"'contents' must be a string, got {type(contents).__name__}")
    return doc_id, contents
