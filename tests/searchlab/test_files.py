"""The central writers and readers name the file at fault: a full disk, and bytes that are not UTF-8."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from searchlab.files import no_space_message, write_atomically
from searchlab.jsonl import RecordError, decode_text, iter_jsonl, read_lines, write_jsonl

# /dev/full is a real device that is always full: every write to it fails with ENOSPC.
needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")


@needs_dev_full
def test_a_full_disk_names_the_file_written_and_says_what_to_do(tmp_path):
    with pytest.raises(OSError) as raised:
        write_jsonl("/dev/full", ({"i": i} for i in range(10_000)))
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == "/dev/full"
    message = no_space_message(raised.value, tmp_path / "data")
    assert message.startswith("/dev/full: No space left on device; free space on that disk, or set runtime.data_dir")


@needs_dev_full
def test_write_atomically_on_a_full_disk_names_the_target_and_leaves_nothing(tmp_path):
    target = tmp_path / "metrics.json"
    # write_atomically writes to a temporary file beside the target first: make that one the full device
    temporary = tmp_path / f".metrics.json.{os.getpid()}.tmp"
    temporary.symlink_to("/dev/full")
    with pytest.raises(OSError) as raised:
        write_atomically(target, lambda out: out.write(b"{}" * 10_000))
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


@needs_dev_full
def test_a_full_disk_without_a_file_name_points_at_the_data_dir(tmp_path):
    with open("/dev/full", "wb", buffering=0) as full:
        with pytest.raises(OSError) as raised:
            full.write(b"x")  # what any writer that does not name its file gives: [Errno 28] and nothing else
    assert raised.value.filename is None
    try:
        raise RuntimeError("saving the checkpoint failed") from raised.value
    except RuntimeError as wrapped:  # found behind the error it caused, too
        message = no_space_message(wrapped, tmp_path / "data")
    assert message == (f"No space left on device while writing under {tmp_path / 'data'}; free space on that disk, "
                       "or set runtime.data_dir to a folder on a disk with room")
    assert no_space_message(ValueError("bad"), tmp_path) is None


LATIN1 = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\tBeyonc\xe9\t1\n".encode("latin-1")


def test_bytes_that_are_not_utf8_are_named_with_file_line_and_bytes(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_bytes(LATIN1)
    with pytest.raises(RecordError) as raised:
        list(read_lines(path))
    assert str(raised.value).startswith(f"{path}:3: not UTF-8 text: bytes b'\\xe9' at byte 10 of the line, "
                                        "after 'q2\\tBeyonc' (invalid continuation byte)")
    # the same file read whole: the line is counted from the start of the file, not of a decoder's chunk
    padded = b"".join(b'{"i": %d}\n' % i for i in range(5000)) + b'{"name": "Beyonc\xe9"}\n'
    with pytest.raises(RecordError, match=r":5001: not UTF-8 text: bytes b'\\xe9' at byte 17 of the line"):
        decode_text(path, padded)
    (tmp_path / "big.jsonl").write_bytes(padded)
    with pytest.raises(RecordError, match=r"big.jsonl:5001: not UTF-8 text: bytes b'\\xe9'"):
        list(iter_jsonl(tmp_path / "big.jsonl"))
