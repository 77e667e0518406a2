"""JSON Lines reading and writing with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


class RecordError(ValueError):
    """A malformed record; ``str()`` names the file and the 1-based line."""

    def __init__(self, path: Path | str, line: int, problem: str):
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = str(path), line, problem


def iter_jsonl(path: Path | str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line; a line that is not JSON raises :class:`RecordError`."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
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
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False))
            f.write("\n")
            count += 1
    return count
