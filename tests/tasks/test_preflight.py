"""`searchlab plan` / the preflight of `searchlab run`: the stages a params file needs and every problem with its
inputs, each with its key and line, found before anything is trained."""

from __future__ import annotations

import pytest

import shutil
from pathlib import Path

from searchlab.params import load_params
from tasks.preflight import preflight
from tests.conftest import REPO, make_project, run_cli

MISTAKES = """\
corpus: {source: jsonl, path: examples/own-data/passages.jsonl}
qa:
  source: files
  files:
    geo: {path: missing/train.parquet}
model: {name_or_path: smollm2-135m-instruct}
rl:
  init: base
  curriculum: [clpo]
  accelerate_config: configs/absent.yaml
  reward: {rubric_weight: 0.3}
eval:
  suites: []
  benchmarks:
    bad: {path: bad.jsonl}
  models: [base, sft, rl]
"""


def _project(tmp_path: Path) -> Path:
    project = make_project(tmp_path / "project")
    shutil.copytree(REPO / "examples/own-data", project / "examples/own-data")
    return project


def test_the_own_data_profile_plans_without_selfplay_or_synthesis_and_checks_every_file():
    found = preflight(load_params(REPO / "params/own-data.yaml"), Path("params/own-data.yaml"), REPO)
    assert found.problems == []
    assert [s.name for s in found.stages] == ["corpus", "index", "qa", "base", "sft", "rl", "evaluate"]
    assert found.inputs["qa.files.geo"] == "examples/own-data/train.parquet: search-r1, 195 questions"
    assert found.inputs["eval.benchmarks.geo-test"] == "examples/own-data/test.jsonl: flashrag, 48 questions"
    assert found.inputs["corpus.path"].endswith("first 219 records are passages")


@pytest.mark.slow
def test_five_mistakes_are_all_reported_in_one_run_with_key_and_line(tmp_path):
    project = _project(tmp_path)
    (project / "params/mistakes.yaml").write_text(MISTAKES)
    (project / "bad.jsonl").write_text('{"id": "a", "question": "Q?", "golden_answers": ["x"]}\n{"id": "b"}\n')
    found = preflight(load_params(project / "params/mistakes.yaml"), Path("params/mistakes.yaml"), project)
    problems = {p.key: p for p in found.problems}
    assert set(problems) == {"qa.files.geo.path", "rl.curriculum", "rl.accelerate_config", "eval.benchmarks.bad",
                             "rl.reward.rubric_weight"}  # sft in eval.models is none: qa makes demonstrations
    assert problems["qa.files.geo.path"].where == "params/mistakes.yaml line 5"
    assert "no such file" in problems["qa.files.geo.path"].message
    assert problems["rl.curriculum"].where == "params/mistakes.yaml line 9" and "no knowledge base" in \
        problems["rl.curriculum"].message
    assert problems["rl.accelerate_config"].where == "params/mistakes.yaml line 10"
    assert "cannot read" in problems["rl.accelerate_config"].message
    assert problems["eval.benchmarks.bad"].where == "params/mistakes.yaml line 15"
    assert "line 2: key 'golden_answers' is missing" in problems["eval.benchmarks.bad"].message
    assert problems["rl.reward.rubric_weight"].where == "params/mistakes.yaml line 11" and "evidence chain" in \
        problems["rl.reward.rubric_weight"].message
    # the CLI prints them all and exits 2; `searchlab run` refuses before any stage (no data folder appears)
    plan = run_cli(project, "plan", "--params", "params/mistakes.yaml", check=False)
    assert plan.returncode == 2 and "5 problem(s)" in plan.stderr
    for key in problems:
        assert key in plan.stderr
    run = run_cli(project, "run", "--params", "params/mistakes.yaml", check=False)
    assert run.returncode == 2 and "5 problem(s)" in run.stderr and not (project / "data/corpus").exists()
    # a profile that extends it: what it inherits is blamed on the file and line that write it
    (project / "params/child.yaml").write_text("extends: mistakes.yaml\nrl:\n  accelerate_config: null\n")
    found = preflight(load_params(project / "params/child.yaml"), Path("params/child.yaml"), project)
    where = {p.key: p.where for p in found.problems}
    assert where == {"qa.files.geo.path": "params/mistakes.yaml line 5", "rl.curriculum": "params/mistakes.yaml line 9",
                     "eval.benchmarks.bad": "params/mistakes.yaml line 15",
                     "rl.reward.rubric_weight": "params/mistakes.yaml line 11"}


def test_the_schema_s_defaults_are_a_valid_configuration_on_their_own(tmp_path):
    """A profile of one's own that states nothing (an empty file, or only `extends: schema`) plans without a
    problem: the defaults fit together (the episode budget within the tiny model's positions)."""
    for text in ("", "extends: schema\n"):
        mine = tmp_path / "params/mine.yaml"
        mine.parent.mkdir(exist_ok=True)
        mine.write_text(text)
        found = preflight(load_params(mine), mine, REPO)
        assert found.problems == [], [p.message for p in found.problems]


@pytest.mark.slow
def test_budgets_that_cannot_fit_the_model_s_positions_are_refused_naming_the_keys(tmp_path):
    for profile in sorted((REPO / "params").glob("*.yaml")):  # every shipped profile fits its model
        found = preflight(load_params(profile), profile.relative_to(REPO), REPO)
        assert "rollout" not in {p.key for p in found.problems}, profile.name
    too_many = ["model.tiny.max_positions=1024", "rollout.max_turns=6"]
    found = preflight(load_params(REPO / "params/smoke.yaml", too_many), Path("params/smoke.yaml"), REPO,
                      overrides=too_many)
    [problem] = found.problems
    rollout_line = next(n for n, line in enumerate((REPO / "params/smoke.yaml").read_text().splitlines(), 1)
                        if line.startswith("rollout:"))
    assert (problem.key, problem.where) == ("rollout", f"params/smoke.yaml line {rollout_line}")
    assert "rollout.max_turns (6) x rollout.max_new_tokens (48) + 5 x rollout.max_information_tokens (160) = " \
           "1088 tokens, and the model reads 1024 positions (model.tiny.max_positions)" in problem.message


def test_a_question_too_long_for_a_pretrained_model_is_named_with_its_line_before_anything_runs(tmp_path):
    project = _project(tmp_path)
    long = "Which " + "very " * 9000 + "long question is this?"  # SmolLM2 reads 8192 positions
    with open(project / "examples/own-data/test.jsonl", "a") as test:
        test.write(f'{{"id": "long", "question": "{long}", "golden_answers": ["x"]}}\n')
    lines = len((project / "examples/own-data/test.jsonl").read_text().splitlines())
    found = preflight(load_params(project / "params/own-data.yaml"), Path("params/own-data.yaml"), project)
    [problem] = found.problems
    assert problem.key == "eval.benchmarks.geo-test"
    assert f"1 question(s) too long for model smollm2-135m-instruct: {project}/examples/own-data/test.jsonl: " \
           f"line {lines} (" in problem.message and "8192 positions" in problem.message


def test_a_problem_made_by_an_override_is_blamed_on_it():
    found = preflight(load_params(REPO / "params/own-data.yaml", ["eval.suites=[world-single]"]),
                      Path("params/own-data.yaml"), REPO, overrides=["eval.suites=[world-single]"])
    assert [(p.key, p.where) for p in found.problems] == [("eval.suites", "--set")]
    # a --set of a mapping replaces it whole: a problem inside it is the --set's, not the profile's line
    replaced = ["eval.benchmarks={b: {path: nope.jsonl}}"]
    found = preflight(load_params(REPO / "params/own-data.yaml", replaced), Path("params/own-data.yaml"), REPO,
                      overrides=replaced)
    assert [(p.key, p.where) for p in found.problems] == [("eval.benchmarks.b.path", "--set")]
    # a key inside a mapping the profile writes, set by --set alone
    moved = ["qa.files.geo.path=nope.parquet"]
    found = preflight(load_params(REPO / "params/own-data.yaml", moved), Path("params/own-data.yaml"), REPO,
                      overrides=moved)
    assert [(p.key, p.where) for p in found.problems] == [("qa.files.geo.path", "--set")]


def test_sft_and_guidance_on_file_questions_plan_without_a_problem():
    """The qa stage makes demonstrations from labeled questions: sft, rl from it and guidance need no KB."""
    overrides = ["rl.init=sft", "rl.guidance.enabled=true", "eval.models=[base, sft, rl]"]
    params = load_params(REPO / "params/own-data.yaml", overrides)
    found = preflight(params, Path("params/own-data.yaml"), REPO, overrides=overrides)
    assert "sft" in [s.name for s in found.stages] and found.problems == []


@pytest.mark.slow
def test_vllm_without_cuda_is_a_note_for_plan_and_a_problem_for_run(tmp_path):
    """A GPU profile is planned on a laptop: plan says what the GPU machine needs; run here refuses, naming the key."""
    project = _project(tmp_path)
    found = preflight(load_params(project / "params/own-data.yaml", ["rl.use_vllm=true"]),
                      Path("params/own-data.yaml"), project, overrides=["rl.use_vllm=true"])
    assert [(p.key, p.where, p.machine) for p in found.problems] == [("rl.use_vllm", "--set", True)]
    run = run_cli(project, "run", "--params", "params/own-data.yaml", "--set", "rl.use_vllm=true", check=False)
    assert run.returncode == 2 and "--set: rl.use_vllm: vLLM needs a CUDA GPU" in run.stderr


def test_the_search_r1_profile_plans_on_this_cpu_machine_with_stand_in_files(tmp_path):
    """params/gpu-qwen2.5-3b.yaml (Search-R1's recipe) with small files at its paths: every input checks out; only
    its need of a CUDA GPU is left, as a note for the machine that runs it."""
    project = _project(tmp_path)
    params = load_params(project / "params/gpu-qwen2.5-3b.yaml")
    inputs = project / "inputs"
    shutil.copy(REPO / "examples/own-data/passages.jsonl", inputs.mkdir() or inputs / "wiki-18.jsonl")
    for spec in [*params.qa.files.values(), *params.eval.benchmarks.values()]:
        (project / spec.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "examples/own-data/test.jsonl", project / spec.path)
    (inputs / "models/Qwen2.5-3B").mkdir(parents=True)
    (inputs / "models/Qwen2.5-3B/config.json").write_text('{"model_type": "qwen2"}')
    found = preflight(params, Path("params/gpu-qwen2.5-3b.yaml"), project)
    assert [s.name for s in found.stages] == ["corpus", "index", "qa", "base", "rl", "evaluate"]
    assert all(p.machine for p in found.problems), found.problems
    assert len([key for key in found.inputs if key.startswith("eval.benchmarks.")]) == 7
    plan = run_cli(project, "plan", "--params", "params/gpu-qwen2.5-3b.yaml")
    assert "no problem found" in plan.stdout


def _write_inputs(project: Path) -> None:
    """The broken inputs of the cases below, written in the project."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = project / "bad"
    bad.mkdir()
    (bad / "empty.jsonl").write_text("")
    (bad / "twice.jsonl").write_text('{"id": "p1", "contents": "A"}\n{"id": "p2", "contents": "B"}\n'
                                     '{"id": "p1", "contents": "C"}\n')
    (bad / "folder").mkdir()
    pq.write_table(pa.table({"doc": ["p1"], "body": ["A"]}), bad / "columns.parquet")
    (bad / "lines.parquet").write_text('{"id": "p1", "contents": "A"}\n')
    (bad / "random.gguf").write_bytes(bytes(range(256)) * 4)


@pytest.mark.parametrize("overrides, key, message", [
    (["corpus.source=jsonl", "corpus.path=bad/empty.jsonl"], "corpus.path", "bad/empty.jsonl: holds no passage"),
    (["corpus.source=jsonl", "corpus.path=bad/twice.jsonl"], "corpus.path",
     "bad/twice.jsonl: line 3: id 'p1' again (first on line 1)"),
    (["corpus.source=jsonl", "corpus.path=bad/folder"], "corpus.path",
     "bad/folder is a folder without .jsonl files: corpus.source jsonl reads a file, or a folder of them"),
    (["corpus.source=parquet", "corpus.path=bad/columns.parquet"], "corpus.path",
     "bad/columns.parquet: needs columns id + contents or id + text (+ title); has ['doc', 'body']"),
    (["corpus.source=parquet", "corpus.path=bad/lines.parquet"], "corpus.path",
     "bad/lines.parquet: not a readable Parquet file"),
    (["model.name_or_path=bad/random.gguf"], "model.name_or_path", "bad/random.gguf: not a GGUF file"),
    (["retriever.method=dense"], "retriever.method", "dense search needs the dense index"),
    (["retriever.url=http://127.0.0.1:9"], "retriever.url", "health check at http://127.0.0.1:9/health failed"),
    (["tracking.mlflow_uri=nosuch://x"], "tracking.mlflow_uri", "nosuch://x: MLflow opens no 'nosuch' store"),
    (["tracking.mlflow_uri=http://127.0.0.1:9"], "tracking.mlflow_uri", "no MLflow server answers"),
])
def test_what_the_run_would_trip_on_is_found_by_the_plan(tmp_path, overrides, key, message):
    project = _project(tmp_path)  # the own-data profile: an imported corpus, labeled questions, SmolLM2
    _write_inputs(project)
    # only up to the stage that reads the input: the later stages' checks (SmolLM2's tokenizer) are others' tests
    target = {"corpus.path": "corpus", "model.name_or_path": "base", "retriever.method": "qa",
              "retriever.url": "qa", "tracking.mlflow_uri": "corpus"}[key]
    found = preflight(load_params(project / "params/own-data.yaml", overrides), Path("params/own-data.yaml"), project,
                      [target], overrides=overrides)
    assert [(p.key, p.where) for p in found.problems] == [(key, "--set")], [p.message for p in found.problems]
    assert message in found.problems[0].message
