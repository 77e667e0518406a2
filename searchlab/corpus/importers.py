"""Import a real corpus (Search-R1/FlashRAG JSONL, Parquet, or a BEIR folder) as ``corpus.jsonl``.

Every importer streams its input record by record and writes
``{"id": str, "contents": "\\"Title\\"\\ntext"}`` lines, so a 21M-passage
Wikipedia dump never sits in memory (only the set of ids seen, to catch
duplicates: about 100 bytes per passage).

Accepted records:

- ``{"id", "contents"}``: contents is kept as is;
- ``{"id", "title", "text"}``: contents becomes ``"\\"{title}\\"\\n{text}"`` (an absent title gives ``""``);
- BEIR ``{"_id", "title", "text"}`` the same way, with ``_id`` as the id.

A malformed record (not JSON, no id, no or empty contents/text, text that is
not a string, a duplicate id) raises :class:`~searchlab.jsonl.RecordError`
naming the file and line (Parquet: the row), or, with ``on_error="skip"``, is
skipped, counted in ``counts["skipped"]`` and logged (the first few in full).
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from searchlab.jsonl import RecordError, decode_line, not_utf8
from searchlab.progress import counter

log = logging.getLogger(__name__)

OnError = Literal["fail", "skip"]
_LOGGED_PROBLEMS = 10  # problems logged one by one in skip mode; the rest are only counted
_BATCH_ROWS = 8192  # Parquet rows read at a time


class _Writer:
    """Writes valid passages to ``corpus.jsonl``, rejects duplicates, and applies the ``on_error`` policy."""

    def __init__(self, path: Path, on_error: OnError):
        self.file = open(path, "w", encoding="utf-8")
        self.on_error = on_error
        self.ids: set[str] = set()
        self.passages = 0
        self.skipped = 0
        self.progress = counter(desc="corpus: import", unit="passage")

    def problem(self, error: RecordError) -> None:
        """Fail on ``error``, or in skip mode count it (and log the first few)."""
        if self.on_error == "fail":
            raise error
        self.skipped += 1
        if self.skipped <= _LOGGED_PROBLEMS:
            log.warning("skipped malformed record: %s", error)

    def add(self, pid: str, contents: str, path: Path | str, line: int) -> None:
        if pid in self.ids:
            self.problem(RecordError(path, line, f"duplicate id {pid!r}"))
            return
        self.ids.add(pid)
        self.file.write(json.dumps({"id": pid, "contents": contents}, ensure_ascii=False))
        self.file.write("\n")
        self.passages += 1
        if self.passages % 10_000 == 0:
            self.progress.update(10_000)

    def __enter__(self) -> "_Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()
        self.progress.close()

    def counts(self, source: Path) -> dict[str, int]:
        """``{"passages", "skipped"}``; raises ``ValueError`` if nothing valid was written."""
        if self.skipped > _LOGGED_PROBLEMS:
            log.warning("skipped %d malformed records in %s (first %d logged)", self.skipped, source, _LOGGED_PROBLEMS)
        if self.passages == 0:
            raise ValueError(f"{source}: no valid passages (empty corpus; {self.skipped} malformed records skipped)")
        return {"passages": self.passages, "skipped": self.skipped}


# ------------------------------------------------------------------ records
def passage(record: Any, id_key: str, path: Path | str, line: int) -> tuple[str, str]:
    """``(id, contents)`` of one record, or :class:`RecordError` saying what is wrong with it."""
    if not isinstance(record, dict):
        raise RecordError(path, line, f"expected a JSON object, got {type(record).__name__}")
    pid = record.get(id_key)
    if pid is None or isinstance(pid, bool) or not isinstance(pid, (str, int)) or str(pid).strip() == "":
        raise RecordError(path, line, f"missing or invalid {id_key!r} (a non-empty string or integer)")
    pid = str(pid)
    if "contents" in record:
        contents = record["contents"]
        if not isinstance(contents, str):
            raise RecordError(path, line, f"'contents' of {pid!r} is not a string")
        if not contents.strip():
            raise RecordError(path, line, f"empty 'contents' in {pid!r}")
        return pid, contents
    if "text" not in record:
        raise RecordError(path, line, f"record {pid!r} has neither 'contents' nor 'text'")
    text, title = record["text"], record.get("title") or ""
    if not isinstance(text, str):
        raise RecordError(path, line, f"'text' of {pid!r} is not a string")
    if not isinstance(title, str):
        raise RecordError(path, line, f"'title' of {pid!r} is not a string")
    if not text.strip():
        raise RecordError(path, line, f"empty 'text' in {pid!r}")
    return pid, f'"{title}"\n{text}'


def split_contents(contents: str) -> tuple[str, str]:
    """``(title, text)`` of a passage's ``contents`` (``"Title"\\ntext``), the title without its quotes."""
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title.strip(), text.strip()


def jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record or RecordError)`` for each non-blank line of a ``.jsonl`` or ``.jsonl.gz`` file.

    A bad line is yielded as its error (not raised) so that skip mode can go on;
    a file that cannot be read at all raises ``ValueError``.
    """
    opener = gzip.open if path.name.endswith(".gz") else open
    number = 0
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    yield number, json.loads(raw)
                except UnicodeDecodeError as err:
                    yield number, RecordError(path, number, not_utf8(raw, err))
                except json.JSONDecodeError as err:
                    yield number, RecordError(path, number, f"not valid JSON ({err.msg} at column {err.colno})")
    except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError; a truncated .gz ends in EOFError
        raise ValueError(f"{path}: cannot read (after line {number}): {err}") from err


def _files(path: Path, patterns: tuple[str, ...]) -> list[Path]:
    """``[path]`` for a file; for a folder, its files matching ``patterns`` in name order."""
    if not path.exists():
        raise FileNotFoundError(f"corpus path does not exist: {path}")
    if path.is_file():
        return [path]
    files = sorted({f for pattern in patterns for f in path.glob(pattern) if f.is_file()})
    if not files:
        raise FileNotFoundError(f"no {' or '.join(patterns)} files in folder {path}")
    return files


# ------------------------------------------------------------------ formats
def import_jsonl(path: Path, out_dir: Path, on_error: OnError = "fail") -> dict[str, int]:
    """Import a JSONL(.gz) file, or a folder of them in name order, into ``out_dir/corpus.jsonl``; return counts."""
    with _Writer(out_dir / "corpus.jsonl", on_error) as writer:
        for file in _files(path, ("*.jsonl", "*.jsonl.gz")):
            _add_jsonl(writer, file, "id")
    return writer.counts(path)


def passage_columns(file: Path, columns: list[str]) -> list[str]:
    """The columns of a Parquet passage file to read: ``id`` and ``contents``, or ``id``, ``text`` and ``title`` if
    there is one; a ValueError naming the file when it has neither."""
    if "id" in columns and "contents" in columns:
        return ["id", "contents"]
    if "id" in columns and "text" in columns:
        return ["id", "text"] + (["title"] if "title" in columns else [])
    raise ValueError(f"{file}: needs columns id + contents or id + text (+ title); has {columns}")


def import_parquet(path: Path, out_dir: Path, on_error: OnError = "fail") -> dict[str, int]:
    """Import a Parquet file, or a folder of them, in row batches into ``out_dir/corpus.jsonl``; return counts.

    Columns: ``id`` and ``contents``, or ``id``, ``text`` and optionally ``title``.
    A bad row is reported as ``file:ROW: row ROW: problem`` (rows counted from 1).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _Writer(out_dir / "corpus.jsonl", on_error) as writer:
        for file in _files(path, ("*.parquet",)):
            try:
                table = pq.ParquetFile(file)
            except (pa.ArrowException, OSError) as err:
                raise ValueError(f"{file}: cannot read as Parquet: {err}") from err
            wanted = passage_columns(file, table.schema_arrow.names)
            row = 0
            try:
                for batch in table.iter_batches(batch_size=_BATCH_ROWS, columns=wanted):
                    for record in batch.to_pylist():
                        row += 1
                        try:
                            writer.add(*passage(record, "id", file, row), file, row)
                        except RecordError as err:
                            writer.problem(RecordError(file, row, f"row {row}: {err.problem}"))
            except (pa.ArrowException, OSError) as err:
                raise ValueError(f"{file}: cannot read Parquet rows after row {row}: {err}") from err
    return writer.counts(path)


def import_beir(path: Path, out_dir: Path, on_error: OnError = "fail") -> dict[str, int]:
    """Import a BEIR folder: ``corpus.jsonl`` → ``out_dir/corpus.jsonl`` (ids = ``_id``),
    ``queries.jsonl`` → ``out_dir/queries.jsonl`` and ``qrels/test.tsv`` (else dev, else train)
    → ``out_dir/qrels.tsv``. Returns counts of passages, queries, qrels and skipped records.

    Queries and qrels are validated under the same ``on_error`` policy and written
    back in BEIR form (each query record with all its fields; the qrels header line
    first), so BEIR tools read them unchanged.
    """
    if not path.is_dir():
        raise FileNotFoundError(f"BEIR corpus path is not a folder: {path}")
    corpus = _first_existing(path, ("corpus.jsonl", "corpus.jsonl.gz"))
    queries = _first_existing(path, ("queries.jsonl", "queries.jsonl.gz"))
    qrels = _first_existing(path / "qrels", ("test.tsv", "dev.tsv", "train.tsv"))

    with _Writer(out_dir / "corpus.jsonl", on_error) as writer:
        _add_jsonl(writer, corpus, "_id")
    counts = writer.counts(corpus)

    n_queries = n_qrels = 0
    with open(out_dir / "queries.jsonl", "w", encoding="utf-8") as out:
        seen: set[str] = set()
        for line, record in jsonl_records(queries):
            try:
                if isinstance(record, RecordError):
                    raise record
                qid, _ = passage(record, "_id", queries, line)  # same checks: an _id and a non-empty text
                if qid in seen:
                    raise RecordError(queries, line, f"duplicate query id {qid!r}")
            except RecordError as err:
                writer.problem(err)
                continue
            seen.add(qid)
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            n_queries += 1
    if n_queries == 0:
        raise ValueError(f"{queries}: no valid queries")

    with open(qrels, "rb") as f, open(out_dir / "qrels.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        unknown = 0
        for line, data in enumerate(f, start=1):
            try:  # decoded line by line: bytes that are not UTF-8 are a bad line, named like any other
                raw = decode_line(qrels, line, data)
            except RecordError as err:
                writer.problem(err)
                continue
            if not raw.strip() or (line == 1 and raw.startswith("query-id")):
                continue
            fields = raw.rstrip("\r\n").split("\t")
            try:
                if len(fields) != 3:
                    raise RecordError(qrels, line, f"expected 3 tab-separated fields, got {len(fields)}")
                try:
                    int(fields[2])
                except ValueError:
                    raise RecordError(qrels, line, f"score {fields[2]!r} is not an integer") from None
            except RecordError as err:
                writer.problem(err)
                continue
            # Judgements of skipped or absent passages/queries are kept (they are the benchmark's),
            # but counted, since they make a perfect score unreachable.
            unknown += fields[0] not in seen or fields[1] not in writer.ids
            out.write("\t".join(fields) + "\n")
            n_qrels += 1
    if unknown:
        log.warning("%s: %d of %d judgements name a query or passage that is not in the import",
                    qrels, unknown, n_qrels)
    return {**counts, "queries": n_queries, "qrels": n_qrels, "skipped": writer.skipped}


def _add_jsonl(writer: _Writer, file: Path, id_key: str) -> None:
    for line, record in jsonl_records(file):
        try:
            if isinstance(record, RecordError):
                raise record
            pid, contents = passage(record, id_key, file, line)
        except RecordError as err:
            writer.problem(err)
            continue
        writer.add(pid, contents, file, line)


def _first_existing(folder: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"BEIR folder lacks {' / '.join(names)} in {folder}")
