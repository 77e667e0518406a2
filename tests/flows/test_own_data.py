"""The field's recipe end to end, at smoke size: a passage file, labeled training questions in verl Parquet and a
pretrained instruct model (SmolLM2-135M, the real checkpoint) go through index -> demonstrations from the labeled
questions -> warm start (SFT on them) -> RL -> evaluation of base, sft and rl on a FlashRAG file, through the real
CLI, Prefect server and MLflow store; no KB, synthesis or self-play."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO, make_project, run_cli

pytestmark = pytest.mark.slow

SMOKE = ["sft.max_steps=1", "sft.samples=0", "rl.steps=1", "rl.questions_per_step=1", "rl.num_generations=2",
         "rl.grad_accum=1", "rl.samples=0", "rl.threads=1", "rollout.max_new_tokens=24", "rollout.max_turns=2",
         "eval.benchmarks.geo-test.sample=2", "eval.resamples=50", "eval.threads=1"]


def test_own_data_profile_warm_starts_and_runs_rl_on_files(prefect_server, tmp_path):
    project = make_project(tmp_path / "project")
    shutil.copytree(REPO / "examples/own-data", project / "examples/own-data")
    args = ["run", "--params", "params/own-data.yaml", *(a for o in SMOKE for a in ("--set", o))]
    proc = run_cli(project, *args, timeout=900)
    data = project / "data-own-data"  # the profile's own data folder
    assert sorted(p.name for p in data.iterdir() if p.is_dir() and not p.name.startswith(".")) == \
        ["base", "corpus", "evaluate", "index", "qa", "rl", "sft"]  # no selfplay or benchmarks stage
    qa = json.loads((data / "qa/manifest.json").read_text())
    assert qa["counts"]["overlap_dropped"] == 3 and qa["counts"]["overlap.geo.geo-test"] == 3
    # no KB needed to read questions; the index, to make their demonstrations
    assert set(qa["inputs"]["upstream"]) == {"corpus", "index"} and qa["counts"]["demos"] > 0
    sft = json.loads((data / "sft/manifest.json").read_text())
    assert sft["counts"]["steps"] == 1 and set(sft["inputs"]["upstream"]) == {"corpus", "index", "qa", "base"}
    rl = json.loads((data / "rl/manifest.json").read_text())
    assert rl["counts"]["steps"] == 1 and set(rl["inputs"]["upstream"]) == {"corpus", "index", "qa", "sft"}
    assert (data / "rl/model.safetensors").is_file()
    metrics = json.loads((data / "evaluate/metrics.json").read_text())
    systems = metrics["benchmarks"]["geo-test"]["systems"]
    assert set(systems) == {"base/agent", "sft/agent", "rl/agent"}
    assert metrics["benchmarks"]["geo-test"]["questions"] == 2
    assert "rl/agent vs base/agent" in metrics["benchmarks"]["geo-test"]["comparisons"]
    assert "geo-test" in proc.stdout  # the results table
    rerun = run_cli(project, "status", "--params", "params/own-data.yaml", *(a for o in SMOKE for a in ("--set", o)))
    assert "stale" not in rerun.stdout and "not needed under these params: benchmarks, selfplay" in rerun.stdout
