"""The pipeline flow: runs the stages up to the requested ones, in order, through Prefect."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.runtime import deployment, flow_run

from flows.links import flow_run_name, link_flow_run, mlflow_tags, mlflow_ui_url, run_name
from flows.serving import check_deployment_run
from searchlab.params import flatten, load_params
from tasks.dvc import record_outputs, write_dvc_yaml, write_effective_params
from tasks.registry import check_force, plan
from tasks.run import stage_task
from tasks.preflight import preflight
from tasks.outputs import git_commit
from tasks.stage import RunContext, StageResult, cached_stages, pipeline_metrics
from tasks.tracking import Tracker


def _flow_run_name() -> str:
    """The Prefect flow run's name, from the parameters it was started with (:func:`flows.links.flow_run_name`)."""
    given = flow_run.parameters
    return flow_run_name(given.get("params_file", "params/default.yaml"), given.get("overrides"), given.get("stages"))


@flow(name="searchlab-pipeline", flow_run_name=_flow_run_name, persist_result=False, log_prints=True)
def pipeline(params_file: str = "params/default.yaml", overrides: list[str] | None = None,
             stages: list[str] | None = None, force: list[str] | None = None, root: str = ".",
             record_dvc: bool = True) -> dict:
    """Run the pipeline up to ``stages`` (all if empty) with a params file and ``key=value`` overrides.

    Returns, per stage, whether it was cached and its fingerprint and counts.
    """
    logger = get_run_logger()
    root_path = Path(root).resolve()
    if deployment.get_id():  # started through the Prefect API, by whoever can reach it: no new endpoints or secrets
        check_deployment_run(root_path, params_file, overrides or [])
    params = load_params(root_path / params_file, overrides or [])
    # the CLI checked all this already; a run from the Prefect UI did not: a problem fails it now, not after the
    # stages before it
    found = preflight(params, Path(params_file), root_path, stages or [], overrides or [])
    if found.problems:
        raise ValueError("problems found before any stage ran:\n  " + "\n  ".join(map(str, found.problems)))
    todo = found.stages
    check_force(force or [], todo)
    tracker = Tracker(params.tracking, root_path)
    commit = git_commit(root_path)
    effective = params.model_dump(mode="json")
    title = run_name(params_file, overrides or [], effective)
    parent = tracker.start_pipeline(
        run_name=title,
        params=flatten(effective),
        tags={"searchlab.params_file": params_file, "searchlab.profile": Path(params_file).stem,
              "searchlab.overrides": " ".join(overrides or []),
              "searchlab.stages": " ".join(stage.name for stage in todo), "searchlab.git_commit": commit,
              "prefect.flow_run_id": flow_run.get_id() or "", "prefect.flow_run_name": flow_run.get_name() or "",
              **mlflow_tags(commit, flow_run.get_id(), flow_run.get_name())},
    )
    link_flow_run(flow_run.get_id(), tracker.run_url(parent, mlflow_ui_url(root_path, tracker.uri)), title,
                  params_file, stages or ["evaluate"])
    ctx = RunContext(root=root_path, params=params, force=frozenset(force or []), tracker=tracker,
                     parent_run_id=parent, flow_run_id=flow_run.get_id(), git_commit=commit,
                     profile=Path(params_file).stem, on_wait=logger.info)
    results: dict[str, StageResult] = {}
    with ctx:  # holds the stage folders this run used until it has recorded them
        try:
            for stage in todo:
                state = stage_task(stage)(ctx, {n: results[n] for n in stage.needs(params)}, return_state=True)
                results[stage.name] = state.result()  # raises if the stage failed
        except BaseException as error:
            tracker.finish_failed(parent, error)
            raise
        computed = [stage for stage, r in results.items() if not r.cached]
        headline = pipeline_metrics(todo, results, ctx.data_dir)
        tracker.finish_pipeline(parent, metrics={"stages_computed": len(computed),
                                                 "stages_cached": len(results) - len(computed), **headline})
        em = [name for name in headline if name.startswith("eval/") and name.endswith("/em")]
        if em:
            tracker.share_agents_view(em)
            logger.info("MLflow, the agents' EM run by run: %s",
                        tracker.agents_view_url(mlflow_ui_url(root_path, tracker.uri)))
        write_effective_params(root_path, params)
        write_dvc_yaml(root_path, params)
        if record_dvc:
            graph = plan([], params)
            problem = record_outputs(root_path, ctx.data_dir, graph, params, set(results),
                                     lambda: cached_stages(graph, params, root_path))
            if problem:
                logger.warning(problem)
    return {name: {"cached": r.cached, "fingerprint": r.manifest["fingerprint"], "counts": r.manifest["counts"],
                   "measured": r.measured, "seconds": r.seconds,
                   "resources": r.resources} for name, r in results.items()}
