"""Writing a file so that a crash leaves the old one or the new one, never half of one."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

# A full disk or an exhausted quota: the write itself is fine, the place it goes is not.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


@contextmanager
def naming_path(path: Path | str) -> Iterator[None]:
    """Give an out-of-space ``OSError`` raised in the block ``path`` as its ``filename``.

    ``write`` and ``close`` report a full disk as a bare ``[Errno 28] No space left on device``; without the
    file nobody can tell which disk filled up.
    """
    try:
        yield
    except OSError as err:
        if err.errno not in NO_SPACE or err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror, str(path)) from err


def write_atomically(path: Path | str, write: Callable[[IO[bytes]], object]) -> None:
    """Let ``write`` fill a temporary file beside ``path``, then move it over ``path`` in one step.

    Beside ``path`` so that :func:`os.replace` is a rename within one file system, which is atomic. Opened with
    plain ``open`` (not ``tempfile.mkstemp``, whose 0600 mode would survive the rename) so the file gets the usual
    permissions. On any failure the temporary file is removed and the old ``path``, if any, is untouched.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with naming_path(path), open(temporary, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _causes(err: BaseException) -> Iterator[BaseException]:
    """``err`` and the exceptions it was raised from or during, nearest first."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def is_no_space(err: BaseException) -> bool:
    """Whether a full disk is behind ``err`` (itself or a cause): an ``OSError`` of :data:`NO_SPACE`, or a
    library's own report of one (safetensors' Rust writer says "No space left on device (os error 28)")."""
    return any(isinstance(cause, OSError) and cause.errno in NO_SPACE or "No space left on device" in str(cause)
               for cause in _causes(err))


def no_space_message(err: BaseException, data_dir: Path | str) -> str | None:
    """One line explaining a full disk behind ``err`` (itself or a cause it was raised from), or None if no disk
    filled up: the file, or else ``data_dir`` (where stages write), and what to do about it."""
    for cause in _causes(err):
        if isinstance(cause, OSError) and cause.errno in NO_SPACE:
            where = f"{cause.filename}: " if cause.filename else ""
            under = "" if cause.filename else f" while writing under {data_dir}"
            return (f"{where}{cause.strerror or os.strerror(cause.errno)}{under}; free space on that disk, or set "
                    "runtime.data_dir to a folder on a disk with room")
    return None
