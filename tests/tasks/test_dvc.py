"""DVC wiring: dvc.yaml matches the stage declarations, and a real DVC repo round-trips a run."""

from __future__ import annotations

import pytest
import yaml

import json
import os
import shutil
import subprocess
from pathlib import Path

from searchlab.params import load_params
from tasks.dvc import pipeline_dir, render_dvc_yaml, rewrites_dvc_yaml
from tasks.registry import STAGES
from tests.conftest import BIN, REPO, make_project, run_cli


def test_dvc_yaml_matches_stage_declarations():
    default = load_params(REPO / "params/default.yaml")
    assert (REPO / "dvc.yaml").read_text() == render_dvc_yaml(default, REPO), "run `searchlab dvc-yaml`"
    assert (REPO / ".dvc/config").read_text().count("remote = local") == 1  # a default remote is configured


def test_a_fresh_clone_s_demo_run_rewrites_no_tracked_file():
    """DVC lists data/evaluate in data/.gitignore and a run writes params.yaml: the committed data/.gitignore must
    already be what DVC writes, and params.yaml (the workspace's, local state like the data) is ignored by git, or a
    fresh clone's first run shows changed files."""
    ignored = (REPO / "data/.gitignore").read_text().split()
    assert sorted(ignored) == sorted(f"/{stage.name}" for stage in STAGES)
    tracked = subprocess.run(["git", "ls-files", "params.yaml", "data-*/params.yaml"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout
    assert tracked == ""
    ignores = subprocess.run(["git", "check-ignore", "params.yaml", "data-own-data/params.yaml",
                              "data-own-data/corpus/manifest.json", "data-own-data/.work/x"],
                             cwd=REPO, capture_output=True, text=True).stdout.split()
    assert len(ignores) == 4
    assert subprocess.run(["git", "check-ignore", "-q", "data-own-data/dvc.yaml"], cwd=REPO).returncode == 1
    assert subprocess.run(["git", "check-ignore", "-q", "data-own-data/dvc.lock"], cwd=REPO).returncode == 1


def test_a_data_folder_other_than_data_carries_its_own_pipeline_run_from_the_root():
    own = load_params(REPO / "params/own-data.yaml")
    assert pipeline_dir(own) == Path("data-own-data") and pipeline_dir(load_params(REPO / "params/smoke.yaml")) == Path(".")
    doc = yaml.safe_load(render_dvc_yaml(own, REPO))
    corpus = doc["stages"]["corpus"]
    assert corpus["wdir"] == ".." and corpus["outs"] == ["data-own-data/corpus"]
    assert corpus["cmd"] == "searchlab run corpus --params data-own-data/params.yaml --no-dvc-commit"
    assert list(corpus["params"][0]) == ["data-own-data/params.yaml"]
    assert doc["stages"]["evaluate"]["deps"][0].startswith("data-own-data/")
    assert doc["metrics"] == ["evaluate/metrics.json"]  # relative to the dvc.yaml, as DVC reads top-level metrics


def test_the_plan_knows_when_a_run_would_rewrite_the_committed_dvc_yaml():
    assert not rewrites_dvc_yaml(load_params(REPO / "params/smoke.yaml"), REPO)  # the demo's graph
    assert not rewrites_dvc_yaml(load_params(REPO / "params/own-data.yaml"), REPO)  # a folder of its own
    assert rewrites_dvc_yaml(load_params(REPO / "params/own-data.yaml", ["runtime.data_dir=data"]), REPO)
    plan = run_cli(REPO, "plan", "--params", "params/own-data.yaml", "--set", "runtime.data_dir=data")
    assert "a run into data/ rewrites it" in plan.stdout and "runtime.data_dir: data-own-data" in plan.stdout


@pytest.mark.slow
def test_runs_of_two_data_folders_leave_tracked_files_alone_and_each_pipeline_up_to_date(tmp_path):
    """A committed project, one stage run into data/ and into another data folder: git shows only what DVC's
    practice commits (each folder's dvc.lock, the other folder's dvc.yaml), and DVC finds both up to date."""
    project = make_project(tmp_path / "project", with_code=True)
    (project / "data").mkdir()
    shutil.copy2(REPO / "data/.gitignore", project / "data/.gitignore")
    env = dict(os.environ, PYTHONPATH=str(project))
    dvc = str(BIN / "dvc")
    _sh(project, "git", "init", "-q", env=env)
    _sh(project, dvc, "init", "-q", env=env)
    _sh(project, "git", "add", "-A", env=env)
    _sh(project, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "project", env=env)
    run_cli(project, "run", "corpus", "--params", "params/smoke.yaml", env=env)
    run_cli(project, "run", "corpus", "--params", "params/smoke.yaml", "--set", "runtime.data_dir=data-x", env=env)
    status = _sh(project, "git", "status", "--porcelain", "--untracked-files=all", env=env).split("\n")
    assert sorted(filter(None, status)) == ["?? data-x/dvc.lock", "?? data-x/dvc.yaml", "?? dvc.lock"]
    for target in ("corpus", "data-x/dvc.yaml:corpus"):
        assert "up to date" in _sh(project, dvc, "status", target, env=env)


def _sh(project, *cmd, env):
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_run_then_dvc_status_clean_repro_noop_and_push_wipe_pull_all_cached(prefect_server, tmp_path):
    project = make_project(tmp_path / "project", with_code=True)
    dvc = str(BIN / "dvc")
    # The copied code must be what runs, so dvc.yaml's code dependencies point inside this repo. The venv is not on
    # PATH (as with `make demo` from a plain shell): the run must find the dvc installed beside its interpreter.
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != BIN.resolve())
    env = dict(os.environ, PYTHONPATH=str(project), PATH=path)
    _sh(project, "git", "init", "-q", env=env)
    _sh(project, dvc, "init", "-q", env=env)
    _sh(project, dvc, "remote", "add", "-d", "local", str(tmp_path / "remote"), env=env)

    run_cli(project, "run", "--params", "params/smoke.yaml", "--no-dvc-commit", env=env)
    assert not (project / "dvc.lock").exists()
    # every stage is cached now, and still the run records what dvc.lock lacks
    run_cli(project, "run", "--params", "params/smoke.yaml", env=env)
    assert "up to date" in _sh(project, dvc, "status", env=env)
    # a forced rebuild of the index (Lucene's files differ in bytes) leaves DVC true for the stages below it too
    run_cli(project, "run", "index", "--params", "params/smoke.yaml", "--force", "index", env=env)
    assert "up to date" in _sh(project, dvc, "status", env=env)
    repro = _sh(project, dvc, "repro", env=env)
    assert "Running stage" not in repro and "up to date" in repro
    # the evaluation's metrics.json (inside the evaluate stage's output folder) is what `dvc metrics` reads
    shown = subprocess.run([dvc, "metrics", "show", "--json"], cwd=project, env=env, capture_output=True, text=True,
                           check=True).stdout
    metrics = json.loads(shown)[""]["data"]["data/evaluate/metrics.json"]["data"]  # "": the workspace
    assert "sft/agent" in metrics["benchmarks"]["world-single"]["systems"]

    _sh(project, dvc, "push", env=env)
    for folder in ("data/corpus", "data/index", "data/qa", "data/benchmarks", "data/base", "data/sft", "data/rl",
                   "data/evaluate", "data/.work",
                   ".dvc/cache"):
        shutil.rmtree(project / folder, ignore_errors=True)
    _sh(project, dvc, "pull", env=env)
    again = run_cli(project, "run", "--params", "params/smoke.yaml", env=env)
    table = [line for line in again.stdout.splitlines() if line.strip().startswith("│")]
    assert sum("cached" in line for line in table) == len(STAGES) and not any("computed" in line for line in table)
