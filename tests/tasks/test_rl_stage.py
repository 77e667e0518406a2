"""The rl stage's inputs from outside the pipeline: a simulated search engine's model folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchlab.params import load_params
from tasks.rl import external_inputs

DEFAULT = Path(__file__).resolve().parents[2] / "params/default.yaml"


def test_a_simulator_folder_is_an_external_input_and_a_missing_one_is_refused_naming_the_key(tmp_path):
    real = load_params(DEFAULT)
    assert external_inputs(real, tmp_path) == {}
    self_search = load_params(DEFAULT, ["rl.search.backend=simulated"])
    assert external_inputs(self_search, tmp_path) == {}  # the policy itself: covered by the sft fingerprint
    named = load_params(DEFAULT, ["rl.search.backend=simulated", "rl.search.simulator=models/sim"])
    with pytest.raises(ValueError, match="rl.search.simulator: no model folder"):
        external_inputs(named, tmp_path)
    (tmp_path / "models/sim").mkdir(parents=True)
    (tmp_path / "models/sim/config.json").write_text("{}")
    assert external_inputs(named, tmp_path) == {"rl.search.simulator": (tmp_path / "models/sim").resolve()}
