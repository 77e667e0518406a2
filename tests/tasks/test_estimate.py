"""The plan's time estimate: work read from the params, the speed of the stage's earlier build, else calibrated."""

from __future__ import annotations

import json
import os

from searchlab.params import load_params
from tasks.estimate import CALIBRATION, estimate, work
from tests.conftest import REPO, make_project, run_cli


def _params(*overrides: str):
    return load_params(REPO / "params/default.yaml", list(overrides))


def test_work_grows_with_what_the_stage_does():
    base = _params()
    assert work("rl", _params(f"rl.steps={2 * base.rl.steps}"), REPO) == 2 * work("rl", base, REPO)
    assert work("evaluate", _params("eval.systems=[agent]"), REPO) < work("evaluate", base, REPO)
    assert work("evaluate", _params("eval.sample=10"), REPO) < work("evaluate", _params("eval.sample=20"), REPO)
    entities = base.corpus.world.entities
    assert work("index", _params(f"corpus.world.entities={2 * entities}"), REPO) == 2 * work("index", base, REPO)


def test_without_an_earlier_build_the_estimate_is_the_calibrated_one_and_a_cached_stage_costs_nothing(tmp_path):
    params = _params()
    fixed, per_unit = CALIBRATION["rl"]["tiny"]
    assert estimate("rl", params, tmp_path, cached=False).seconds == fixed + per_unit * work("rl", params, tmp_path)
    assert estimate("rl", params, tmp_path, cached=False).basis == "calibrated"
    assert estimate("rl", params, tmp_path, cached=True).seconds == 0


def test_the_plan_scales_the_earlier_build_s_measured_speed(tmp_path):
    """A real corpus build records its work; the plan for a world twice as big expects about twice its time."""
    project = make_project(tmp_path / "project")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run_cli(project, "run", "corpus", "--params", "params/smoke.yaml", env=env)
    record = json.loads((project / "data/corpus/build.json").read_text())
    smoke = load_params(project / "params/smoke.yaml")
    assert record["work"] == work("corpus", smoke, project) > 0

    cached = run_cli(project, "plan", "corpus", "--params", "params/smoke.yaml", env=env).stdout
    assert "corpus      cached        0 s (cached)" in cached and "estimated time on this machine: 0 s" in cached

    bigger = smoke.corpus.world.entities * 2
    planned = estimate("corpus", load_params(project / "params/smoke.yaml", [f"corpus.world.entities={bigger}"]),
                       project, cached=False)
    fixed = CALIBRATION["corpus"]["tiny"][0]
    assert planned.basis == "earlier build"
    assert abs(planned.seconds - (fixed + 2 * max(record["seconds"] - fixed, 0))) < 1e-9
    stale = run_cli(project, "plan", "corpus", "--params", "params/smoke.yaml", "--set",
                    f"corpus.world.entities={bigger}", env=env).stdout
    assert "(earlier build)" in stale
