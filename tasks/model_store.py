"""Content-addressed snapshots of registered model folders, so a registry version always names the same weights.

A model stage publishes its output at one path (``data/sft/``) and every rerun replaces that folder, so a
registry version that referenced the path would silently hand out whatever was trained last. Registration
therefore snapshots the published folder into ``mlartifacts/models/<content hash>/`` (git-ignored, next to
MLflow's artifacts) and registers that folder. The content hash is :func:`tasks.outputs.content_digest` of the output's files
(their relative paths and SHA-256s, as its manifest lists them).

The snapshot is made of hard links to the published files: no byte is copied, and it is safe because a stage
never modifies its output in place (a rerun builds a new folder and renames it into place, see
``tasks.outputs.publish``), so the old files live on in the snapshot after the rerun removes its old folder.
Where linking fails (another filesystem) the files are copied. A file changed in place, in the snapshot or in
the published folder that shares its inode, is caught when the version is loaded: :func:`check_snapshot`
hashes the folder again (a ``stat`` per file once hashed, from a stat cache in ``mlartifacts/models/.stat/``).

Snapshots are never deleted by the pipeline; deleting one makes its versions fail to load with a message.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from tasks.outputs import MANIFEST, content_digest, listing_hash, read_manifest, recall, remember, sha256_file

# A file modified less than this long before it was hashed may change again without its mtime moving (timestamps
# advance in ticks, up to 2 s on some filesystems), so its hash is not cached and the next check reads it again.
_SETTLED_NS = 2_000_000_000


def store_dir(root: Path) -> Path:
    """Where the project keeps model snapshots."""
    return root / "mlartifacts" / "models"


# what a checkpoint loader reads (beside the *.safetensors and model *.bin weights); the rest of a model stage's
# folder records how its run went (logs, samples, the Trainer's training_args.bin with its paths)
MODEL_FILES = {"config.json", "generation_config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
               "merges.txt", "chat_template.jinja", "tokenizer.model"}


def weights_hash(files: dict[str, dict[str, Any]]) -> str:
    """The content hash of the model in an output (weights, config, tokenizer: what loading it reads), so that two
    runs that trained the same weights are one model however their logs differ; the whole content's hash for an
    output with no such file."""
    def is_model(rel: str) -> bool:
        name = Path(rel).name
        return name in MODEL_FILES or name.endswith(".safetensors") or (
            name.endswith(".bin") and name != "training_args.bin")

    model = {rel: meta for rel, meta in files.items() if is_model(rel)}
    return content_digest(model or files)


def snapshot(folder: Path, files: dict[str, dict[str, Any]], store: Path) -> tuple[Path, str]:
    """``(snapshot folder, content hash)`` of the published output ``folder`` whose manifest lists ``files``:
    the store's folder for that content, made now unless an intact one exists already.

    Raises ValueError if ``folder`` no longer holds what ``files`` says (it changed since its stage wrote it).
    """
    digest = content_digest(files)
    target = store / digest
    if target.is_dir():
        if snapshot_intact(store, digest):
            return target, digest
        aside = store / f".broken-{uuid.uuid4().hex[:12]}"  # changed or damaged: replaced by a fresh snapshot
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            pass  # another run moved it aside first
        shutil.rmtree(aside, ignore_errors=True)
    tmp = store / f".tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir(parents=True)
    try:
        for rel in [*files, MANIFEST]:
            source, dest = folder / rel, tmp / rel
            if rel == MANIFEST and not source.is_file():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, dest)
            except OSError:  # another filesystem, or one without hard links
                shutil.copy2(source, dest)
        # What was linked is what the folder holds now; hash it, so a folder changed since its stage wrote it (or
        # replaced by another run) is never registered under the hash of what it held before.
        problem = check_snapshot(tmp, digest, stat_cache(store, digest), expected=files)
        if problem:
            raise ValueError(f"{folder}: {problem} since its stage wrote it")
        try:
            os.rename(tmp, target)
        except OSError:  # another run stored the same content just now, and checked it as we did ours
            if not target.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target, digest


def stat_cache(store: Path, digest: str) -> Path:
    """The stat cache of the snapshot of content ``digest``."""
    return store / ".stat" / f"{digest}.json"


def snapshot_intact(store: Path, digest: str) -> bool:
    """Whether the store's snapshot of content ``digest`` still holds that content."""
    return check_snapshot(store / digest, digest, stat_cache(store, digest)) is None


def check_snapshot(folder: Path, digest: str, cache_file: Path,
                   expected: dict[str, dict[str, Any]] | None = None) -> str | None:
    """None if the files of ``folder`` (every file but manifests, as ``describe_files`` lists them) have content
    hash ``digest``, else what is wrong, file by file where ``expected`` (or the folder's manifest) says what
    each file should hold.

    A file whose size, mtime and inode are those it had when last hashed is not read again.
    """
    if not folder.is_dir():
        return f"{folder} is missing"
    cache, fresh, hashes = recall(cache_file), {}, {}
    now = time.time_ns()
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name == MANIFEST:
            continue
        rel, st = path.relative_to(folder).as_posix(), path.stat()
        known = cache.get(rel)
        key = [st.st_size, st.st_mtime_ns, st.st_ino]
        hashes[rel] = known[3] if known and known[:3] == key else sha256_file(path)
        if st.st_mtime_ns < now - _SETTLED_NS:
            fresh[rel] = [*key, hashes[rel]]
    if fresh != cache:
        try:
            remember(fresh, cache_file)
        except OSError:  # a read-only store can still be checked, only more slowly next time
            pass
    if listing_hash(hashes.items()) == digest:
        return None
    if expected is None:
        expected = (read_manifest(folder) or {}).get("files")
    if expected is None or content_digest(expected) != digest:  # nothing trustworthy to compare file by file
        return f"it holds other content now (content {listing_hash(hashes.items())[:12]}, not {digest[:12]})"
    problems = [f"{rel} is missing" for rel in expected if rel not in hashes]
    problems += [f"{rel} has changed content" for rel in expected if rel in hashes
                 and hashes[rel] != expected[rel]["sha256"]]
    problems += [f"{rel} was added" for rel in hashes if rel not in expected]
    return ", ".join(problems)
