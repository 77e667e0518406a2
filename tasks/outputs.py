"""A stage's output folder: its manifest, its build record, its content hashes, and the check that it is intact.

``data/<stage>/manifest.json`` records the fingerprint that produced the folder,
the size and SHA-256 of every file in it, and the hash of its content: two
builds of the same inputs, on two machines, write the same manifest byte for
byte. What varies from one build to the next without changing the content (when
it ran, for how long, at what speed, under which MLflow run) goes to
``data/<stage>/build.json`` instead, which the manifest's file list, the content
hash and DVC (``.dvcignore``) all leave out. :func:`verify` tells whether the
folder still holds exactly that; it re-hashes only files whose size or mtime
changed since they were last verified (a local stat cache under
``data/.work/``), so a no-op run costs a ``stat`` per file, not a read.
:func:`content_hashes` hashes a stage's inputs from outside the pipeline (an
external benchmark file, a model folder) the same way, for its fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
BUILD_RECORD = "build.json"  # how the folder's build ran: beside the content, never part of it


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """SHA-256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def describe_files(folder: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {"size", "sha256"}}`` for every file under ``folder`` but its manifest and build record."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.relative_to(folder).as_posix() not in (MANIFEST, BUILD_RECORD):
            files[path.relative_to(folder).as_posix()] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    return files


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when it is missing or unreadable (a corrupt output is never cached)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and "fingerprint" in manifest else None


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def read_build_record(folder: Path) -> dict[str, Any]:
    """The folder's build record (seconds, finished_at, git_commit, run ids, measurements); empty when it did not
    come with the folder (DVC leaves it out, so a ``dvc pull`` brings the content without it)."""
    try:
        record = json.loads((folder / BUILD_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def write_build_record(folder: Path, record: dict[str, Any]) -> None:
    (folder / BUILD_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def content_digest(files: dict[str, dict[str, Any]], unhashed: Iterable[str] = ()) -> str:
    """The hash of an output's content from its manifest's ``files``: :func:`listing_hash` of the files but those
    under the folders ``unhashed`` names, whose bytes a library makes differ between two builds of one content
    (Lucene writes a random id and a timestamp into each segment); the stage covers their content by a digest in
    a file that is hashed (the index's ``index_info.json``)."""
    skip = tuple(folder.rstrip("/") + "/" for folder in unhashed)
    return listing_hash((rel, meta["sha256"]) for rel, meta in files.items() if not rel.startswith(skip))


def verify(folder: Path, manifest: dict[str, Any], stat_cache: Path) -> str | None:
    """Check the folder against its manifest; return None if intact, else what is wrong."""
    cache, fresh = recall(stat_cache), {}
    for rel, expected in manifest.get("files", {}).items():
        path = folder / rel
        try:
            st = path.stat()
        except OSError:
            return f"{rel} is missing"
        if st.st_size != expected["size"]:
            return f"{rel} has changed size"
        key = [st.st_size, st.st_mtime_ns, expected["sha256"]]
        if cache.get(rel) != key and sha256_file(path) != expected["sha256"]:
            return f"{rel} has changed content"
        fresh[rel] = key
    if fresh != cache:
        remember(fresh, stat_cache)
    return None


def remember_published(folder: Path, manifest: dict[str, Any], stat_cache: Path) -> None:
    """Record the stats of a folder just written from the hashes in its manifest, so no file is read twice."""
    remember({rel: [(folder / rel).stat().st_size, (folder / rel).stat().st_mtime_ns, f["sha256"]]
              for rel, f in manifest["files"].items()}, stat_cache)


def recall(stat_cache: Path) -> dict[str, list]:
    """The entries :func:`remember` wrote (``{key: [size, mtime_ns, sha256]}``); none if the file is missing or torn."""
    try:
        return json.loads(stat_cache.read_text())
    except (OSError, ValueError):
        return {}


def remember(entries: dict[str, list], stat_cache: Path) -> None:
    stat_cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = stat_cache.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(entries))
    os.replace(tmp, stat_cache)


def publish(scratch: Path, target: Path, trash_dir: Path) -> None:
    """Move a finished scratch folder into place as ``target``, replacing any old one.

    Both are renames on one filesystem, so ``target`` is at every moment either
    the old complete folder, absent, or the new complete folder; never partial.
    """
    trash_dir.mkdir(parents=True, exist_ok=True)
    old = None
    if target.exists():
        old = trash_dir / f"{target.name}-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(scratch, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def listing_hash(files: Iterable[tuple[str, str]]) -> str:
    """One hash of a folder's content from its ``(relative path, sha256)`` pairs (what DVC also tracks)."""
    digest = hashlib.sha256()
    for rel, sha in sorted(files):
        digest.update(f"{rel}\0{sha}\n".encode())
    return digest.hexdigest()


def content_hashes(paths: dict[str, Path], stat_cache: Path) -> dict[str, str]:
    """``{label: hash}`` of files and folders outside the pipeline's outputs (a file's sha256, a folder's
    :func:`listing_hash`).

    A file whose size and mtime are those recorded in ``stat_cache`` is not read again, so a large model folder
    costs a ``stat`` per file on every run after the first.
    """
    cache, fresh = recall(stat_cache), {}

    def file_hash(path: Path) -> str:
        st, key = path.stat(), str(path.resolve())
        known = cache.get(key)
        sha = known[2] if known and known[:2] == [st.st_size, st.st_mtime_ns] else sha256_file(path)
        fresh[key] = [st.st_size, st.st_mtime_ns, sha]
        return sha

    hashes = {}
    for label, path in paths.items():
        if path.is_dir():
            hashes[label] = listing_hash((f.relative_to(path).as_posix(), file_hash(f))
                                         for f in path.rglob("*") if f.is_file())
        else:
            hashes[label] = file_hash(path)
    if fresh != cache:
        remember(fresh, stat_cache)
    return hashes


#: What a run writes itself among tracked files (the root's stage graph, which a profile of one's own on data/
#: rewrites): a change to it is the run's record, which the stages' fingerprints already hold, not a change to the
#: code. (params.yaml is not tracked.)
RUN_WRITTEN = ("dvc.yaml",)


def git_commit(root: Path) -> str:
    """The checked-out commit, with ``-dirty`` when tracked files other than :data:`RUN_WRITTEN` have changes
    (``unknown`` outside git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude,top){name}" for name in RUN_WRITTEN)],
                               cwd=root, capture_output=True, text=True).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
