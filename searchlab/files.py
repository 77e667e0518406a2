"""Writing a file so that a crash leaves the old one or the new one, never half of one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO


def write_atomically(path: Path | str, write: Callable[[IO[bytes]], object]) -> None:
    """Let ``write`` fill a temporary file beside ``path``, then move it over ``path`` in one step.

    Beside ``path`` so that :func:`os.replace` is a rename within one file system, which is atomic. Opened with
    plain ``open`` (not ``tempfile.mkstemp``, whose 0600 mode would survive the rename) so the file gets the usual
    permissions. On any failure the temporary file is removed and the old ``path``, if any, is untouched.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
