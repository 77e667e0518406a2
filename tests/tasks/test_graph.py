"""The stage graph is computed from the params: plan, fingerprints and dvc.yaml follow the same graph."""

from __future__ import annotations

from pathlib import Path

import yaml

from searchlab.params import load_params
from tasks.dvc import render_dvc_yaml
from tasks.registry import plan
from tasks.stage import fingerprint, fingerprint_inputs

REPO = Path(__file__).resolve().parents[2]


def _params(profile: str = "default", *overrides: str):
    return load_params(REPO / f"params/{profile}.yaml", list(overrides))


def _names(stages) -> list[str]:
    return [stage.name for stage in stages]


def _fingerprints(params, root: Path) -> dict[str, str]:
    """Every planned stage's fingerprint, upstream first, as a run computes them."""
    fps: dict[str, str] = {}
    for stage in plan([], params):
        fps[stage.name] = fingerprint(fingerprint_inputs(stage, params, root, fps))
    return fps


def test_the_demo_needs_every_stage_and_rl_reads_selfplay_only_when_it_trains_on_its_questions():
    params = _params()
    assert _names(plan([], params)) == ["corpus", "index", "qa", "benchmarks", "base", "sft", "selfplay", "rl",
                                        "evaluate"]
    rl = plan(["rl"], params)
    assert _names(rl) == ["corpus", "index", "qa", "base", "sft", "rl"]  # rl.questions: [qa]
    assert "selfplay" in _names(plan(["rl"], _params("default", "rl.questions=[qa, selfplay]")))


def test_evaluating_the_base_model_builds_no_training_stage():
    assert _names(plan([], _params("default", "eval.models=[base]"))) == ["corpus", "index", "qa", "benchmarks",
                                                                           "base", "evaluate"]


def test_the_own_data_profile_warm_starts_rl_by_sft_on_the_file_demonstrations():
    params = _params("own-data")
    assert _names(plan([], params)) == ["corpus", "index", "qa", "base", "sft", "rl", "evaluate"]
    # sft samples the warm-started agent's episodes (the index); rl starts from sft's weights, not base's
    assert [s.needs(params) for s in plan([], params)][4:] == [("corpus", "index", "qa", "base"),
                                                               ("corpus", "index", "qa", "sft"),
                                                               ("index", "base", "sft", "rl")]


def test_rl_from_base_on_files_needs_no_sft_selfplay_or_benchmarks():
    params = _params("own-data", "rl.init=base", "eval.models=[base, rl]")
    assert _names(plan([], params)) == ["corpus", "index", "qa", "base", "rl", "evaluate"]
    # qa searches the index: the demonstrations it makes from the labeled questions
    assert [s.needs(params) for s in plan([], params)][2:] == [("corpus", "index"), (),
                                                               ("corpus", "index", "qa", "base"),
                                                               ("index", "base", "rl")]


def test_a_selfplay_param_changes_rl_only_when_rl_reads_selfplay_questions(tmp_path):
    before = _fingerprints(_params(), tmp_path)
    after = _fingerprints(_params("default", "selfplay.rounds=9"), tmp_path)
    assert after["selfplay"] != before["selfplay"]
    assert after["rl"] == before["rl"]
    reads = _fingerprints(_params("default", "rl.questions=[qa, selfplay]"), tmp_path)
    assert _fingerprints(_params("default", "rl.questions=[qa, selfplay]", "selfplay.rounds=9"), tmp_path)["rl"] \
        != reads["rl"]


def test_dvc_yaml_declares_the_computed_graph(tmp_path):
    stages = yaml.safe_load(render_dvc_yaml(_params("own-data", "rl.init=base", "eval.models=[base, rl]"),
                                            REPO))["stages"]
    assert list(stages) == ["corpus", "index", "qa", "base", "rl", "evaluate"]
    data = "data-own-data/"  # the profile's own data folder
    assert [d for d in stages["rl"]["deps"] if d.startswith(data)] == [data + up for up in ("corpus", "index", "qa",
                                                                                            "base")]
    assert [d for d in stages["evaluate"]["deps"] if d.startswith(data)] == [data + up for up in ("index", "base",
                                                                                                  "rl")]


def test_selfplay_from_base_on_files_feeds_rl_without_sft():
    params = _params("own-data", "rl.questions=[qa, selfplay]", "selfplay.init=base", "rl.init=base",
                     "eval.models=[base, rl]")
    assert _names(plan([], params)) == ["corpus", "index", "qa", "base", "selfplay", "rl", "evaluate"]
    assert plan(["selfplay"], params)[-1].needs(params) == ("corpus", "index", "qa", "base")
