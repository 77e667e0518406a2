"""The stage contract (fingerprint, cached, atomic, resumable, locked) on small real stages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from searchlab.params import load_params
from tasks.locking import StageLock
from tasks.stage import pipeline_status
from tests.tasks.toy_stages import ALPHA, BETA, SHARDS, run_both

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "params.yaml").write_text("corpus:\n  world:\n    entities: 50\nindex:\n  threads: 1\n")
    return tmp_path


def calls(root: Path) -> list[str]:
    path = root / "calls.log"
    return path.read_text().split() if path.exists() else []


def test_second_run_is_cached_and_does_no_work(root):
    first = run_both(root)
    assert [r.cached for r in first.values()] == [False, False]
    second = run_both(root)
    assert [r.cached for r in second.values()] == [True, True]
    assert calls(root) == ["alpha", "beta"]
    manifest = json.loads((root / "data/alpha/manifest.json").read_text())
    assert manifest["fingerprint"] == second["alpha"].manifest["fingerprint"]
    assert manifest["counts"] == {"items": SHARDS, "reused_shards": 0}
    assert set(manifest["files"]) == {"items.jsonl"}


def test_downstream_param_reruns_only_downstream(root):
    run_both(root)
    out = run_both(root, ["index.threads=2"])
    assert (out["alpha"].cached, out["beta"].cached) == (True, False)
    assert json.loads((root / "data/beta/summary.json").read_text())["threads"] == 2


def test_upstream_param_reruns_both(root):
    run_both(root)
    out = run_both(root, ["corpus.world.entities=70"])
    assert (out["alpha"].cached, out["beta"].cached) == (False, False)


def test_unrelated_section_changes_nothing(root):
    run_both(root)
    out = run_both(root, ["retriever.topk=7", "tracking.experiment=other"])
    assert (out["alpha"].cached, out["beta"].cached) == (True, True)


@pytest.mark.parametrize("damage", ["delete_file", "edit_same_size", "delete_folder", "corrupt_manifest"])
def test_damaged_output_is_never_cached(root, damage):
    run_both(root)
    items = root / "data/alpha/items.jsonl"
    if damage == "delete_file":
        items.unlink()
    elif damage == "edit_same_size":
        text = items.read_text()
        items.write_text(text.replace("0", "9", 1))
    elif damage == "delete_folder":
        import shutil

        shutil.rmtree(root / "data/alpha")
    else:
        (root / "data/alpha/manifest.json").write_text("{not json")
    out = run_both(root)
    assert out["alpha"].cached is False
    assert json.loads(items.read_text().splitlines()[0])["i"] == 0


def test_force_recomputes(root):
    run_both(root)
    out = run_both(root, force=frozenset({"alpha"}))
    assert out["alpha"].cached is False
    assert out["beta"].cached is True  # same content, so the same fingerprint downstream


def test_failure_leaves_previous_output_and_no_scratch(root):
    run_both(root)
    before = (root / "data/alpha/items.jsonl").read_text()
    (root / "crash_after").write_text("2")
    with pytest.raises(RuntimeError, match="crash before shard 2"):
        run_both(root, ["corpus.world.entities=80"])
    assert (root / "data/alpha/items.jsonl").read_text() == before
    assert not list((root / "data/.work/alpha").glob("tmp-*"))


def test_a_resume_folder_of_other_inputs_is_pruned_when_the_stage_is_published(root):
    from tasks.stage import pipeline_status

    (root / "crash_after").write_text("3")
    with pytest.raises(RuntimeError):
        run_both(root, ["corpus.world.entities=80"])  # leaves 3 shards to resume under these inputs
    (root / "crash_after").unlink()
    params = load_params(root / "params.yaml")
    row = pipeline_status([ALPHA], params, root)[0]
    assert row["abandoned"] == 1 and row["abandoned_bytes"] > 0 and row["resume_bytes"] == 0
    run_both(root)  # other inputs: the interrupted build's folder would only be resumed if they came back
    assert not list((root / "data/.work/alpha").glob("resume-*"))
    assert pipeline_status([ALPHA], params, root)[0]["abandoned"] == 0


def test_rerun_after_crash_resumes_from_shards(root):
    (root / "crash_after").write_text("4")
    with pytest.raises(RuntimeError):
        run_both(root)
    assert not (root / "data/alpha").exists()
    (root / "crash_after").unlink()
    out = run_both(root)
    assert out["alpha"].manifest["counts"]["reused_shards"] == 4
    # the resumed output equals an uninterrupted run's
    fresh = root / "fresh"
    fresh.mkdir()
    (fresh / "params.yaml").write_text((root / "params.yaml").read_text())
    assert (fresh_out := run_both(fresh))["alpha"].manifest["counts"]["reused_shards"] == 0
    assert (root / "data/alpha/items.jsonl").read_bytes() == (fresh / "data/alpha/items.jsonl").read_bytes()
    assert out["alpha"].manifest["fingerprint"] == fresh_out["alpha"].manifest["fingerprint"]
    # resume state is dropped once the stage succeeded
    assert not list((root / "data/.work/alpha").glob("resume-*"))


def _spawn(root: Path, *overrides: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.tasks.toy_stages", str(root), *overrides], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def test_kill_9_mid_write_never_exposes_partial_output_and_rerun_completes(root):
    (root / "pause").write_text("0.3")
    proc = _spawn(root)
    deadline = time.time() + 60
    while not list((root / "data/.work/alpha").glob("tmp-*/items.jsonl")):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.4)  # part of the file is written
    assert not (root / "data/alpha").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (root / "data/alpha").exists()
    (root / "pause").unlink()
    out = run_both(root)
    assert out["alpha"].cached is False
    assert len((root / "data/alpha/items.jsonl").read_text().splitlines()) == SHARDS


def test_concurrent_runs_compute_once(root):
    (root / "pause").write_text("0.2")
    procs = [_spawn(root) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert calls(root) == ["alpha", "beta"]
    assert sorted(r["alpha"]["cached"] for r in results) == [False, True]  # one computed, the other found it cached


def test_a_run_never_reads_an_upstream_output_that_another_run_replaced(root):
    """Run A's beta starts while A holds alpha(50); run B then builds alpha(70). B may not publish it until A has
    read alpha: A's beta reads the alpha its fingerprint names, and B's beta its own."""
    (root / "pause_beta").write_text("2")
    first = _spawn(root)
    deadline = time.time() + 60
    while not list((root / "data/.work/beta").glob("tmp-*")):  # A is inside beta's build, before reading alpha
        assert time.time() < deadline and first.poll() is None
        time.sleep(0.05)
    second = _spawn(root, "corpus.world.entities=70")
    a, b = (json.loads(p.communicate(timeout=120)[0]) for p in (first, second))
    assert a["beta"]["counts"]["entities_read"] == 50 and b["beta"]["counts"]["entities_read"] == 70
    assert a["beta"]["upstream"] == {"alpha": a["alpha"]["fingerprint"]}
    assert b["beta"]["upstream"] == {"alpha": b["alpha"]["fingerprint"]} != a["beta"]["upstream"]
    # the folders now hold B's outputs, recorded under B's fingerprints
    assert json.loads((root / "data/beta/manifest.json").read_text())["fingerprint"] == b["beta"]["fingerprint"]


def test_concurrent_runs_of_two_fingerprints_build_each_once(root):
    """Three runs at once, two with the same params: every (stage, fingerprint) is built exactly once, and each
    run's beta read the alpha of its own params."""
    (root / "pause_beta").write_text("0.5")
    procs = [_spawn(root), _spawn(root), _spawn(root, "corpus.world.entities=70")]
    results = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
    assert sorted(calls(root)) == ["alpha", "alpha", "beta", "beta"]
    assert [r["beta"]["counts"]["entities_read"] for r in results] == [50, 50, 70]
    same = results[:2]
    assert sorted(r["beta"]["cached"] for r in same) == [False, True]
    assert same[0]["beta"]["fingerprint"] == same[1]["beta"]["fingerprint"]


def test_lock_of_killed_holder_is_recovered(tmp_path):
    lock_path = tmp_path / "locks/alpha.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time; from pathlib import Path; from tasks.locking import StageLock;"
         f"l=StageLock(Path({str(lock_path)!r}),'holder'); l.acquire(); print('held', flush=True); time.sleep(60)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    waits = []
    with pytest.raises(TimeoutError):
        StageLock(lock_path, "second", timeout_s=0.5, on_wait=waits.append).acquire()
    assert waits and f"pid {holder.pid}" in waits[0]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.time()
    with StageLock(lock_path, "third", timeout_s=5):
        assert time.time() - started < 1


def test_status_reports_missing_cached_and_why_stale(root):
    params = load_params(root / "params.yaml")
    assert [r["state"] for r in pipeline_status([ALPHA, BETA], params, root)] == ["missing", "missing"]
    run_both(root)
    assert [r["state"] for r in pipeline_status([ALPHA, BETA], params, root)] == ["cached", "cached"]
    changed = load_params(root / "params.yaml", ["corpus.world.entities=99"])
    rows = pipeline_status([ALPHA, BETA], changed, root)
    assert rows[0]["state"] == "stale" and rows[0]["why"] == ["param corpus.world.entities: 50 -> 99"]
    assert rows[1]["state"] == "stale" and rows[1]["why"] == ["upstream alpha changed"]


def test_the_commit_stamp_is_dirty_for_code_changes_not_for_the_files_a_run_writes(tmp_path):
    from tasks.outputs import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for name in ("dvc.yaml", "code.py"):
        (tmp_path / name).write_text("a: 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    head = git_commit(tmp_path)
    assert len(head) == 40
    (tmp_path / "dvc.yaml").write_text("a: 2\n")  # a profile of one's own on data/ rewrote it
    assert git_commit(tmp_path) == head
    (tmp_path / "code.py").write_text("a: 2\n")
    assert git_commit(tmp_path) == head + "-dirty"
