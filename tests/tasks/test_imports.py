"""A stage's code is derived from its imports: every module it runs enters its fingerprint and its DVC deps."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tasks.imports import MACHINERY, project_modules
from tasks.registry import STAGES
from tasks.stage import Stage, _hash_code, code_hash
from tests.conftest import REPO


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_project_module_a_stage_loads_is_in_its_code(stage):
    """What Python really loads when the stage's module is imported is covered (checked in a fresh interpreter)."""
    module = stage.build.__module__
    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout)
    ours = {m for m in loaded if m.partition(".")[0] in ("searchlab", "tasks")}
    assert ours - MACHINERY - {"tasks.imports"} <= set(project_modules(module))


def test_the_modules_the_issue_found_missing_are_covered():
    for module in ("tasks.qa", "tasks.sft", "tasks.evaluate"):  # they shape every information block
        assert "searchlab.corpus.importers" in project_modules(module)
    assert "tasks.tracking" in project_modules("tasks.evaluate")  # resolves models:/ references
    # run in child processes, named by a string: the training job and the index builder
    assert {"searchlab.train.sft_job", "searchlab.train.pretrain"} <= set(project_modules("tasks.sft"))
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
