"""The pipeline flow against a real Prefect server, on the seconds-scale profile, with real corpus and index."""

from __future__ import annotations

import pytest

import json
import os
import time

from tests.conftest import REPO, make_project


def _external(folder) -> tuple[str, str]:
    """Overrides adding an external benchmark file, evaluated beside the built-in suites: the example's questions
    without their evidence passages, which are the demo world's and not in the smoke world's index (the evaluate
    stage would refuse them); absolute, since the projects are copies elsewhere."""
    path = folder / "flashrag-sample.jsonl"
    rows = [json.loads(line) for line in (REPO / "examples/eval/flashrag-sample.jsonl").read_text().splitlines()]
    path.write_text("".join(json.dumps({**row, "metadata": {"hops": row["metadata"]["hops"]}}) + "\n"
                            for row in rows))
    return f"eval.benchmarks.flashrag-sample.path={path}", "eval.benchmarks.flashrag-sample.sample=3"


def _task_states(flow_run_id, expected: int) -> dict[str, str]:
    """Task-run state names as the Prefect server recorded them (waiting briefly: task states arrive asynchronously)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    deadline = time.monotonic() + 15
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                         sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=50)
            states = {run.name: run.state.name for run in runs if run.state and run.state.is_final()}
            if len(states) >= expected or time.monotonic() > deadline:
                return states
            time.sleep(0.2)


@pytest.mark.slow
def test_pipeline_caches_and_reruns_only_what_changed(prefect_server, tmp_path):
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from flows.pipeline import pipeline

    project = make_project(tmp_path / "project")
    external = _external(tmp_path)

    def run(*overrides, root=project):
        with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            state = pipeline(params_file="params/smoke.yaml", overrides=[*external, *overrides], root=str(root),
                             return_state=True)
        summary = state.result()
        flow_runs.append(state.state_details.flow_run_id)
        return summary, _task_states(state.state_details.flow_run_id, len(summary))

    flow_runs = []

    stages = ("corpus", "index", "qa", "benchmarks", "base", "sft", "selfplay", "rl", "evaluate")
    summary, states = run()
    first_flow_run = flow_runs[0]
    assert {k: v["cached"] for k, v in summary.items()} == dict.fromkeys(stages, False)
    assert states == dict.fromkeys(stages, "Completed")
    assert summary["corpus"]["counts"]["passages"] == summary["index"]["counts"]["documents"] > 0
    assert summary["qa"]["counts"]["train"] > 0 and summary["benchmarks"]["counts"]["train_answer_overlap"] == 0
    assert summary["sft"]["counts"]["steps"] == 6 and (project / "data/sft/model.safetensors").is_file()
    assert summary["base"]["counts"]["pretrain_steps"] > 0 and (project / "data/base/model.safetensors").is_file()
    _check_rl(project, summary["rl"])
    _check_selfplay(project, summary["selfplay"])
    _check_evaluation(project, summary["evaluate"])
    _check_pipeline_run(project, first_flow_run)
    _check_reproducible(project, run)

    summary, states = run()
    assert states == dict.fromkeys(stages, "Cached")

    summary, states = run("benchmarks.size=5")  # only the benchmarks stage reads this section, and evaluate its output
    assert states == {"corpus": "Cached", "index": "Cached", "qa": "Cached", "benchmarks": "Completed", "base": "Cached",
                      "sft": "Cached", "rl": "Cached", "selfplay": "Cached", "evaluate": "Completed"}

    # an sft param retrains from the base model as it is: no new tokenizer, no new pretraining
    summary, states = run("benchmarks.size=5", "sft.learning_rate=0.003")
    assert states == {**dict.fromkeys(stages[:5], "Cached"), "sft": "Completed", "rl": "Completed",
                      "selfplay": "Completed", "evaluate": "Completed"}

    summary, states = run("benchmarks.size=5", "index.threads=2")  # the index and everything downstream of it
    assert states == {"corpus": "Cached", **dict.fromkeys(stages[1:], "Completed")}

    summary, states = run("benchmarks.size=5", "index.threads=2", "corpus.world.seed=1")
    assert states == dict.fromkeys(stages, "Completed")

    # the effective params are recorded for DVC
    assert "seed: 1" in (project / "params.yaml").read_text()
    manifest = json.loads((project / "data/index/manifest.json").read_text())
    assert manifest["inputs"]["upstream"]["corpus"] == summary["corpus"]["fingerprint"]


MODELS = ("sft", "rl", "selfplay")
# the demo's eval.models, which smoke keeps: the one-turn baselines for sft, the trained agents as agents
SYSTEMS = {"sft": ("direct", "rag", "agent"), "rl": ("agent",), "selfplay": ("agent",)}


def _check_reproducible(project, run):
    """A second build of the same params in another folder has the same content, stage by stage: the same
    manifest byte for byte (the index's lists Lucene's own bytes, which differ, but its content hash does not),
    and every file but the build record and Lucene's files the same."""
    other = make_project(project.parent / "other")
    summary, _ = run(root=other)
    assert not any(row["cached"] for row in summary.values())
    for stage in summary:
        mine, theirs = (json.loads((root / "data" / stage / "manifest.json").read_text()) for root in (project, other))
        assert mine["content"] == theirs["content"], stage
        if stage != "index":
            assert mine == theirs, stage
        files = {rel: meta for rel, meta in mine["files"].items() if not rel.startswith("bm25/")}
        assert files == {rel: meta for rel, meta in theirs["files"].items() if not rel.startswith("bm25/")}, stage
        assert json.loads((other / "data" / stage / "build.json").read_text())["seconds"] >= 0
    assert (project / "data/sft/build.json").read_bytes() != (other / "data/sft/build.json").read_bytes()
    assert not (project / "data/sft/training_args.bin").exists()


def _check_evaluation(project, summary):
    """The evaluate stage's outputs, and its results as MLflow metrics and artifacts of its stage run."""
    from mlflow import MlflowClient

    from tasks.tracking import default_tracking_uri

    out = project / "data/evaluate"
    results = json.loads((out / "metrics.json").read_text())
    assert list(results["benchmarks"]) == ["world-single", "flashrag-sample"]
    assert results["benchmarks"]["flashrag-sample"]["questions"] == 3
    assert list(results["benchmarks"]["world-single"]["systems"]) == [
        f"{model}/{system}" for model in MODELS for system in SYSTEMS[model]]
    comparisons = results["benchmarks"]["world-single"]["comparisons"]
    assert {"rl/agent vs sft/agent", "selfplay/agent vs sft/agent", "selfplay/agent vs rl/agent"} <= set(comparisons)
    singles = len((project / "data/benchmarks/world-single.jsonl").read_text().splitlines())  # eval.sample: 2
    assert singles >= 1 and summary["counts"] == {"benchmarks": 2, "questions": min(singles, 2) + 3, "shards": 10}
    for benchmark in results["benchmarks"]:
        assert {p.name for p in (out / "predictions" / benchmark).iterdir()} == {
            f"{model}-{system}.jsonl" for model in MODELS for system in SYSTEMS[model]}
    assert "| flashrag-sample | sft/agent |" in (out / "report.md").read_text()
    assert all((out / name).read_bytes().startswith(b"\x89PNG") for name in ("em.png", "searches.png"))

    record = json.loads((out / "build.json").read_text())
    run = MlflowClient(default_tracking_uri(project)).get_run(record["mlflow_run_id"])
    metrics = run.data.metrics
    em = results["benchmarks"]["world-single"]["systems"]["sft/agent"]["em"]
    assert (metrics["eval/world-single/sft-agent/em"], metrics["eval/world-single/sft-agent/em_low"],
            metrics["eval/world-single/sft-agent/em_high"]) == (em["mean"], em["low"], em["high"])
    assert {"eval/flashrag-sample/sft-rag/f1", "eval/world-single/sft-agent_vs_sft-rag/p_value",
            "eval/world-single/rl-agent_vs_sft-agent/p_value",
            "throughput/sft-agent/questions_per_s", "counts/shards"} <= set(metrics)
    artifacts = {a.path for a in MlflowClient(default_tracking_uri(project)).list_artifacts(run.info.run_id)}
    assert {"report.md", "em.png", "searches.png"} <= artifacts


def _check_pipeline_run(project, flow_run_id):
    """The pipeline's own MLflow run: a telling name, the headline results and stage figures (what MLflow's compare
    view shows), MLflow's source tags and a link to its Prefect flow run, which links back to it."""
    from mlflow import MlflowClient
    import httpx
    from prefect.client.orchestration import get_client

    from tasks.tracking import default_tracking_uri

    client = MlflowClient(default_tracking_uri(project))
    evaluate = json.loads((project / "data/evaluate/build.json").read_text())["mlflow_run_id"]
    run = client.get_run(client.get_run(evaluate).data.tags["mlflow.parentRunId"])
    assert run.data.tags["prefect.flow_run_id"] == str(flow_run_id)
    name = run.info.run_name
    assert name.startswith("smoke · eval.benchmarks.flashrag-sample.path=") and len(name.split(" · ")[-1]) == 8
    results = json.loads((project / "data/evaluate/metrics.json").read_text())
    em = results["benchmarks"]["world-single"]["systems"]["selfplay/agent"]["em"]
    metrics = run.data.metrics
    assert (metrics["eval/world-single/selfplay-agent/em"], metrics["eval/world-single/selfplay-agent/em_low"],
            metrics["eval/world-single/selfplay-agent/em_high"]) == (em["mean"], em["low"], em["high"])
    assert not any("_vs_" in m or m.endswith("/f1") for m in metrics)  # the headline only
    assert metrics["stages/sft/steps"] == 6 and metrics["stages/rl/steps"] == 2 and "stages/selfplay/seconds" in metrics
    assert metrics["stages_computed"] == 9
    tags = run.data.tags
    assert tags["mlflow.source.name"].startswith("searchlab-pipeline") and tags["mlflow.user"]
    with get_client(sync_client=True) as prefect:
        flow_run = prefect.read_flow_run(flow_run_id)
    # through the REST API: this Prefect client sends nulls for the filters it is not given, which the server refuses
    found = httpx.post(os.environ["PREFECT_API_URL"] + "/artifacts/filter", json={"artifacts": {
        "key": {"any_": ["mlflow-run"]}, "flow_run_id": {"any_": [str(flow_run_id)]}}}).raise_for_status().json()
    assert len(found) == 1
    link = found[0]
    assert f"/runs/flow-run/{flow_run_id})" in tags["mlflow.note.content"]
    # what the UIs show first: the params file and the stage asked for (few enough tags for the run list's row),
    # names with profile and stage, and the agents' view
    assert set(flow_run.tags) == {"params:smoke.yaml", "stage:evaluate"}
    assert flow_run.name.startswith("smoke · eval.benchmarks.flashrag-sample.path=")
    assert flow_run.name.endswith(" · evaluate")
    assert client.get_run(evaluate).info.run_name == "smoke · evaluate"
    experiment = client.get_experiment(run.info.experiment_id).tags
    assert experiment["mlflow.experimentKind"] == "custom_model_development"
    assert "metrics.`eval/world-single/selfplay-agent/em`" in json.loads(
        experiment["mlflow.sharedViewState.agents"])["selectedColumns"]
    assert f"/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id})" in link["data"]


def _check_rl(project, summary):
    """The rl stage's outputs, its curves in MLflow, and its registry alias."""
    from mlflow import MlflowClient

    from tasks.tracking import default_tracking_uri

    out = project / "data/rl"
    assert summary["counts"]["steps"] == 2 and (out / "model.safetensors").is_file()
    assert {"train_log.jsonl", "curriculum.jsonl", "trajectories.jsonl", "curves.png", "samples.md"} <= {
        p.name for p in out.iterdir()}
    client = MlflowClient(default_tracking_uri(project))
    run_id = json.loads((out / "build.json").read_text())["mlflow_run_id"]
    assert [m.step for m in client.get_metric_history(run_id, "train/episode/outcome")] == [1, 2]
    assert [m.step for m in client.get_metric_history(run_id, "train/curriculum/noise_p")] == [1, 2]
    _check_alias(project, "rl", run_id)


def _check_selfplay(project, summary):
    """The selfplay stage's outputs, its per-round curves in MLflow, and its registry alias."""
    from mlflow import MlflowClient

    from searchlab.jsonl import read_jsonl
    from tasks.tracking import default_tracking_uri

    out = project / "data/selfplay"
    assert summary["counts"]["steps"] == 2 and (out / "model.safetensors").is_file()
    assert {"train_log.jsonl", "questions.jsonl", "rounds.jsonl", "datasheet.md", "samples.md"} <= {
        p.name for p in out.iterdir()}
    records = read_jsonl(out / "questions.jsonl")
    assert len(records) == summary["counts"]["proposals"] == 2 * 2 * 2  # rounds x seed answers x proposals
    assert all(r["verified"] == (r["reason"] is None) for r in records)
    assert [r["round"] for r in read_jsonl(out / "rounds.jsonl")] == [0, 1]
    client = MlflowClient(default_tracking_uri(project))
    run_id = json.loads((out / "build.json").read_text())["mlflow_run_id"]
    for name in ("verified_share", "solver_success", "proposer_reward", "novelty", "kb_correct_share"):
        assert [m.step for m in client.get_metric_history(run_id, f"train/selfplay/{name}")] == [1, 2], name
    _check_alias(project, "selfplay", run_id)


def _check_alias(project, stage, run_id):
    """The stage's registry alias names a version of exactly its weights: the stage run's own or, where the smoke
    profile's two steps moved nothing (every group's rewards equal: no advantage), the sft run's version of the
    same weights (one version per content)."""
    from mlflow import MlflowClient

    from tasks.model_store import weights_hash
    from tasks.tracking import default_tracking_uri

    version = MlflowClient(default_tracking_uri(project)).get_model_version_by_alias("searchlab-agent", stage)
    files = json.loads((project / "data" / stage / "manifest.json").read_text())["files"]
    assert version.tags["searchlab.weights_hash"] == weights_hash(files)
    sft_run = json.loads((project / "data/sft/build.json").read_text())["mlflow_run_id"]
    assert version.run_id in (run_id, sft_run)
