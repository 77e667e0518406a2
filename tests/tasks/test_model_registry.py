"""Registered model versions against a real MLflow SQLite store in a temp dir: each version keeps the content it
was registered with, loading checks it, and the same content is never registered twice."""

import fcntl
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mlflow import MlflowClient

from searchlab.params import TrackingParams
from tasks.outputs import content_digest
from tasks.outputs import describe_files, publish, write_manifest
from tasks.tracking import Tracker, TrackingError, model_folder
from tests.conftest import REPO

PARAMS = TrackingParams(experiment="t")


def _publish(root: Path, files: dict[str, bytes]) -> tuple[Path, dict]:
    """Publish ``data/m/`` the way a stage does: fill a scratch folder, write its manifest, rename it into place."""
    scratch = root / "data/.work/m" / f"tmp-{uuid.uuid4().hex[:8]}"
    for rel, data in files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_bytes(data)
    manifest = {"stage": "m", "fingerprint": uuid.uuid4().hex, "files": describe_files(scratch)}
    write_manifest(scratch, manifest)
    publish(scratch, root / "data/m", root / "data/.work/m/trash")
    return root / "data/m", manifest


def _register(tracker: Tracker, root: Path, alias: str, files: dict[str, bytes]) -> str:
    out, manifest = _publish(root, files)
    run_id = tracker.start_stage(None, "m", {}, {"searchlab.stage": "m"})
    return tracker.register_model(run_id, "agent", alias, out, manifest["files"],
                                  {"searchlab.path": "data/m", "searchlab.stage": "m"})


def _load(root: Path, alias: str) -> Path:
    return Path(model_folder(f"models:/agent@{alias}", PARAMS, root))


def test_each_version_keeps_its_content_and_a_changed_one_is_refused(tmp_path):
    tracker = Tracker(PARAMS, tmp_path)
    assert _register(tracker, tmp_path, "first", {"config.json": b"{}", "w/model.bin": b"first"}) == "1"
    assert _register(tracker, tmp_path, "second", {"config.json": b"{}", "w/model.bin": b"second!"}) == "2"
    live = tmp_path / "data/m"

    first, second = _load(tmp_path, "first"), _load(tmp_path, "second")
    assert (first / "w/model.bin").read_bytes() == b"first"  # not data/m's newer weights
    assert (second / "w/model.bin").read_bytes() == b"second!"
    assert first.parent == second.parent == tmp_path / "mlartifacts/models"
    # no byte copied: the newest version's files are the published files
    assert (second / "w/model.bin").stat().st_ino == (live / "w/model.bin").stat().st_ino

    # data/m changed in place (same size): the version sharing its files is refused, the older one still loads
    (live / "w/model.bin").write_bytes(b"SECOND!")
    assert (_load(tmp_path, "first") / "w/model.bin").read_bytes() == b"first"
    with pytest.raises(TrackingError) as refused:
        _load(tmp_path, "second")
    message = str(refused.value)
    assert message.startswith("models:/agent@second is version 2 (registered by run ")
    assert "no longer holds that content: w/model.bin has changed content" in message
    assert "`searchlab run m --force m`" in message and "Nothing was loaded" in message

    (first / "config.json").write_text('{"x": 1}')  # the snapshot itself tampered with
    with pytest.raises(TrackingError, match="version 1 .* config.json has changed content"):
        _load(tmp_path, "first")
    shutil.rmtree(first)
    with pytest.raises(TrackingError, match=f"that content: {first} is missing"):
        _load(tmp_path, "first")


def test_the_same_weights_under_other_logs_are_the_same_version(tmp_path):
    tracker = Tracker(PARAMS, tmp_path)
    model = {"config.json": b"{}", "model.safetensors": b"weights"}
    first = _register(tracker, tmp_path, "sft", {**model, "train_log.jsonl": b'{"seconds": 1.5}\n',
                                                  "training_args.bin": b"/clone/one"})
    again = _register(tracker, tmp_path, "rl", {**model, "train_log.jsonl": b'{"seconds": 1.7}\n',
                                                 "training_args.bin": b"/clone/two"})
    assert first == again == "1"
    assert (_load(tmp_path, "rl") / "train_log.jsonl").read_bytes() == b'{"seconds": 1.5}\n'  # the version's own
    assert _register(tracker, tmp_path, "other", {**model, "model.safetensors": b"other weights"}) == "2"
    shutil.rmtree(_load(tmp_path, "sft"))  # version 1's snapshot is gone: the same weights get a new version
    assert _register(tracker, tmp_path, "again", {**model, "train_log.jsonl": b"{}\n"}) == "3"


def test_a_version_registered_by_path_is_refused_once_the_path_holds_other_content(tmp_path):
    # how versions were registered before snapshots: the live folder as the source
    tracker = Tracker(PARAMS, tmp_path)
    out, manifest = _publish(tmp_path, {"config.json": b"{}", "w/model.bin": b"old"})
    client = MlflowClient(tracker.uri)
    client.create_registered_model("agent")
    client.create_model_version("agent", out.resolve().as_uri(),
                                tags={"searchlab.content_hash": content_digest(manifest["files"])})
    client.set_registered_model_alias("agent", "old", "1")
    assert _load(tmp_path, "old") == out.resolve()  # it still holds that content
    _publish(tmp_path, {"config.json": b"{}", "w/model.bin": b"new"})  # a rerun replaced it
    with pytest.raises(TrackingError, match=r"version 1 \(registered with content .* holds other content now"):
        _load(tmp_path, "old")


def _blocked_on_locks() -> set[int]:
    """The pids of processes waiting for a file lock (``->`` lines of /proc/locks: ``N: -> FLOCK ADVISORY WRITE
    pid ...``)."""
    lines = (line.split() for line in Path("/proc/locks").read_text().splitlines())
    return {int(fields[fields.index("->") + 4]) for fields in lines if "->" in fields}


@pytest.mark.slow
def test_the_same_content_registered_again_even_by_concurrent_runs_is_one_version(tmp_path):
    tracker = Tracker(PARAMS, tmp_path)
    out, manifest = _publish(tmp_path, {"config.json": b"{}", "w/model.bin": b"weights"})
    run_id = tracker.start_stage(None, "m", {}, {})
    # three runs' MLflow workers, as three `searchlab run` processes start them
    workers = [subprocess.Popen([sys.executable, "-m", "tasks.tracking", tracker.uri, "t", str(tmp_path)],
                                cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for _ in range(3)]
    try:
        for worker in workers:  # wait until each has MLflow loaded
            worker.stdin.write(json.dumps(["experiment_id", []]) + "\n")
            worker.stdin.flush()
            assert "result" in json.loads(worker.stdout.readline())
        # Holding the project's MLflow lock, the test lines the three registrations up at it: each must wait
        # there (the kernel lists it as blocked on the lock) and none may have written a version meanwhile.
        with open(tmp_path / "mlflow.db.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for alias, worker in zip("abc", workers):
                worker.stdin.write(json.dumps(["register_model", [run_id, "agent", alias, str(out),
                                                                  manifest["files"], {}]]) + "\n")
                worker.stdin.flush()
            deadline = time.monotonic() + 60
            while _blocked_on_locks() < {w.pid for w in workers}:
                assert time.monotonic() < deadline, "the registrations did not wait for the MLflow lock"
                time.sleep(0.05)
            assert MlflowClient(tracker.uri).search_model_versions("name='agent'") == []
        replies = [json.loads(worker.stdout.readline()) for worker in workers]
    finally:
        for worker in workers:
            worker.stdin.close()
            worker.wait(timeout=30)
    assert replies == [{"result": "1"}] * 3
    # published again by a later run (new files, same content): still that version, and the alias moves to it
    assert _register(tracker, tmp_path, "later", {"config.json": b"{}", "w/model.bin": b"weights"}) == "1"
    client = MlflowClient(tracker.uri)
    assert [str(v.version) for v in client.search_model_versions("name='agent'")] == ["1"]
    assert {str(client.get_model_version_by_alias("agent", alias).version) for alias in "abc"} == {"1"}
    assert str(client.get_model_version_by_alias("agent", "later").version) == "1"
