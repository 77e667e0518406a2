"""docs/params.md is generated from the params schema: it is current, and every key has a description."""

from __future__ import annotations

import shutil

from pydantic import BaseModel, Field

from searchlab.params import load_params
from searchlab.params_doc import DOC_PATH, iter_keys, render_params_doc, undocumented_keys
from tests.conftest import REPO, run_cli


def test_every_params_key_has_a_description():
    assert undocumented_keys() == [], "give each of these fields a Field(..., description=...) in searchlab/params.py"


def test_docs_params_md_is_what_the_schema_gives():
    expected = render_params_doc(load_params(REPO / "params/default.yaml"))
    assert (REPO / DOC_PATH).read_text() == expected, "docs/params.md is stale: run `searchlab params-doc`"


def test_the_check_command_passes_on_the_repository():
    proc = run_cli(REPO, "params-doc", "--check", timeout=120)
    assert "docs/params.md is current" in proc.stdout


def test_the_check_command_fails_on_a_stale_file_naming_it_and_the_command(tmp_path):
    (tmp_path / "params").mkdir()
    shutil.copy(REPO / "params/default.yaml", tmp_path / "params/default.yaml")
    (tmp_path / "docs").mkdir()
    (tmp_path / DOC_PATH).write_text("# Params\n\n| key | default | meaning |\n")
    stale = run_cli(tmp_path, "params-doc", "--check", check=False, timeout=120)
    assert stale.returncode == 1
    assert "docs/params.md" in stale.stderr and "searchlab params-doc" in stale.stderr
    run_cli(tmp_path, "params-doc", timeout=120)  # writes it
    assert (tmp_path / DOC_PATH).read_text() == (REPO / DOC_PATH).read_text()
    run_cli(tmp_path, "params-doc", "--check", timeout=120)


def test_every_key_has_its_row_with_the_demo_value_where_it_differs():
    text = (REPO / DOC_PATH).read_text()
    for key in iter_keys():
        section, _, rest = key.path.partition(".")
        if rest:
            assert f"| `{rest}` |" in text, f"no row for {key.path}"
    assert "| `world.entities` | `1000` (demo: `1200`) |" in text
    assert "(one of `grpo`, `dr_grpo`, `dapo`, `bnpo`, `cispo`, `sapo`)" in text  # a Literal's values, named


class _Inner(BaseModel):
    documented: int = Field(1, description="says what it does")
    forgotten: int = 2


class _Schema(BaseModel):
    documented: int = Field(1, description="says what it does")
    bare: str = "x"
    inner: _Inner = Field(_Inner(), description="a section")
    undescribed_section: _Inner = _Inner()
    named: dict[str, _Inner] = Field(default_factory=dict, description="sections by name")
    listed: list[_Inner] = Field(default_factory=list, description="a list of sections")


def test_an_undocumented_field_is_reported_by_its_dotted_key():
    assert undocumented_keys(_Schema) == [
        "bare", "inner.forgotten", "undescribed_section", "undescribed_section.forgotten", "named.NAME.forgotten",
        "listed[].forgotten"]
    assert undocumented_keys(_Inner) == ["forgotten"]
