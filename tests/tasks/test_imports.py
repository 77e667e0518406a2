"""A stage's code is derived from its imports: every module it runs enters its fingerprint and its DVC deps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tasks.imports import COMPOSITE, MACHINERY, direct_imports, module_file, project_modules
from tasks.registry import STAGES
from tasks.stage import Stage, _hash_code, code_hash
from tests.conftest import REPO, make_project

# the section modules the params composite imports to compose Params: loaded by every stage, covered only by the
# stages whose own code imports them (the values of the sections a stage reads are in its fingerprint as params)
SECTIONS = {m for m in direct_imports(COMPOSITE, module_file(COMPOSITE)) if m.endswith(".config")} - {"searchlab.config"}


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_project_module_a_stage_loads_is_in_its_code(stage):
    """What Python really loads when the stage's module is imported is covered (checked in a fresh interpreter)."""
    module = stage.build.__module__
    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout)
    ours = {m for m in loaded if m.partition(".")[0] in ("searchlab", "tasks")}
    # the section modules' packages run too (their __init__.py import nothing), and what the section modules
    # import for their word lists (the question record's types and buckets)
    packages = {m.rpartition(".")[0] for m in SECTIONS}
    assert not any(direct_imports(p, module_file(p)) for p in packages)
    sections = {m for s in SECTIONS for m in project_modules(s)}
    # and the stage contract's machinery with what it loads (the params loader, the progress line)
    machinery = {m for name in MACHINERY for m in project_modules(name)}
    assert ours - machinery - sections <= set(project_modules(module))


def test_the_modules_the_issue_found_missing_are_covered():
    for module in ("tasks.qa", "tasks.sft", "tasks.evaluate"):  # they shape every information block
        assert "searchlab.corpus.importers" in project_modules(module)
    assert "tasks.tracking" in project_modules("tasks.evaluate")  # resolves models:/ references
    # run in child processes, named by a string: the training job and the index builder
    assert {"searchlab.train.sft_worker", "searchlab.train.pretrain"} <= set(project_modules("tasks.sft"))
    assert "searchlab.retrieval.build_worker" in project_modules("tasks.index")


def test_editing_code_reached_only_through_a_deferred_import_or_a_child_process_changes_the_fingerprint(
        tmp_path, monkeypatch):
    package = tmp_path / "toypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "stage.py").write_text(textwrap.dedent("""
        def build(ctx):
            from toypkg import helper  # deferred, as the project's stages do to keep the CLI fast
            return helper.run()
    """))
    (package / "helper.py").write_text(textwrap.dedent("""
        import subprocess, sys
        def run():
            return subprocess.run([sys.executable, "-m", "toypkg.worker"]).returncode
    """))
    (package / "worker.py").write_text("print('v1')\n")
    (package / "unused.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from toypkg.stage import build

    stage = Stage("toy", "toy", (), (), build)
    assert project_modules("toypkg.stage") == ("toypkg", "toypkg.helper", "toypkg.stage", "toypkg.worker")
    before = code_hash(stage, tmp_path)
    (package / "worker.py").write_text("print('v2')\n")
    _hash_code.cache_clear()  # one process hashes the code once; this test edits it in between
    assert code_hash(stage, tmp_path) != before


FINGERPRINTS = """
import json
from pathlib import Path
from searchlab.params import load_params
from tasks.registry import plan
from tasks.stage import fingerprint, fingerprint_inputs
params, fps = load_params("params/default.yaml"), {}
for stage in plan([], params):
    fps[stage.name] = fingerprint(fingerprint_inputs(stage, params, Path("."), fps))
print(json.dumps(fps))
"""


ALL_STAGES = {"corpus", "index", "qa", "benchmarks", "base", "sft", "selfplay", "rl", "evaluate"}
# the stages a description edit in each section module makes stale under the demo's params: those whose own code
# imports the module, and everything downstream of them (a fingerprint holds its upstream fingerprints)
STALE_AFTER_A_DESCRIPTION_EDIT = {
    "searchlab.rl.config": {"selfplay", "rl", "evaluate"},  # selfplay shares rl's GRPO settings
    "searchlab.selfplay.config": {"selfplay", "evaluate"},
    "searchlab.train.config": {"sft", "selfplay", "rl", "evaluate"},
    # the qa stage's; base reads qa for the tiny model's tokenizer, so all but the corpus and its index follow
    "searchlab.synth.config": ALL_STAGES - {"corpus", "index"},
    "searchlab.eval.config": {"selfplay", "evaluate"},  # self-play's verifier plays evaluation's systems
    # the question-file entry (qa.files, eval.benchmarks), which the sections above import
    "searchlab.questions.config": ALL_STAGES - {"corpus", "index"},
}


@pytest.mark.parametrize("module", sorted(STALE_AFTER_A_DESCRIPTION_EDIT))
def test_a_description_edit_in_a_config_module_makes_only_the_stages_that_import_it_stale(tmp_path, module):
    """A section's module is in the code of the stages that import it, not in every stage's through the params
    composite: nothing upstream of them reruns."""
    assert SECTIONS <= set(STALE_AFTER_A_DESCRIPTION_EDIT)
    project = make_project(tmp_path / "project", with_code=True)

    def fingerprints() -> dict[str, str]:  # in the copy's own code (PYTHONPATH comes before the editable install)
        return json.loads(subprocess.run([sys.executable, "-c", FINGERPRINTS], cwd=project, check=True, text=True,
                                         capture_output=True, env={**os.environ, "PYTHONPATH": str(project)}).stdout)

    before = fingerprints()
    config = project / module_file(module).relative_to(REPO)
    text = config.read_text()
    assert 'description="' in text
    config.write_text(text.replace('description="', 'description="(reworded) ', 1))
    after = fingerprints()
    assert {name for name in before if before[name] != after[name]} == STALE_AFTER_A_DESCRIPTION_EDIT[module]
