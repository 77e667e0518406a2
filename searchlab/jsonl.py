"""JSON Lines reading and writing with errors that name the file and line."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from searchlab.files import naming_path


class RecordError(ValueError):
    """A malformed record; ``str()`` names the file and the 1-based line."""

    def __init__(self, path: Path | str, line: int, problem: str):
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = str(path), line, problem


def not_utf8(raw: bytes, err: UnicodeDecodeError) -> str:
    """What is wrong with ``raw`` (one line, as bytes) that ``err`` failed to decode: the bytes and where."""
    before = raw[max(0, err.start - 30):err.start].decode("utf-8", errors="replace")
    return (f"not UTF-8 text: bytes {raw[err.start:err.end]!r} at byte {err.start + 1} of the line, after "
            f"{before!r} ({err.reason}); convert the file to UTF-8, e.g. with iconv -f latin1 -t utf-8")


def decode_line(path: Path | str, number: int, raw: bytes) -> str:
    """Line ``number`` of a UTF-8 file as text; bytes that are not UTF-8 raise :class:`RecordError` naming them."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(path, number, not_utf8(raw, err)) from None


def decode_text(path: Path | str, data: bytes) -> str:
    """A whole UTF-8 file's bytes as text; bytes that are not UTF-8 raise :class:`RecordError` naming their line
    (a decoder's own error counts bytes from the start of the file, which nobody can find in an editor)."""
    data = data.removeprefix(codecs.BOM_UTF8)  # what Windows tools put first; the same text without it
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        start = data.rfind(b"\n", 0, err.start) + 1
        end = data.find(b"\n", err.start)
        line = data[start:end if end >= 0 else len(data)]
        shifted = UnicodeDecodeError(err.encoding, line, err.start - start, err.end - start, err.reason)
        raise RecordError(path, data.count(b"\n", 0, err.start) + 1, not_utf8(line, shifted)) from None


def read_lines(path: Path | str) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` of a UTF-8 text file, line endings kept, a byte-order mark at its start dropped
    (as every reader of a text file here does); see :func:`decode_line`."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            yield number, decode_line(path, number, raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw)


def iter_jsonl(path: Path | str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line; a line that is not JSON (or not UTF-8) raises
    :class:`RecordError`."""
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordError(path, number, f"not valid JSON ({err.msg} at column {err.colno})") from None


def read_jsonl(path: Path | str) -> list[Any]:
    """All records of a JSONL file, in order."""
    return [record for _, record in iter_jsonl(path)]


def write_jsonl(path: Path | str, records: Iterable[Any]) -> int:
    """Write records one per line (UTF-8, no ASCII escaping); return how many were written."""
    count = 0
    with naming_path(path), open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False))
            f.write("\n")
            count += 1
    return count
