"""The pipeline as a work-pool deployment: `searchlab deploy` registers it, `searchlab worker` runs it.

:func:`deployed_pipeline` is the flow a work-pool deployment runs. It has only
the parameters a person starting a run should set (its Prefect parameter
schema, the form the UI shows, lists exactly these, with descriptions and the
stage names as an enum); the project root is where the worker runs it, and
outputs are always recorded in ``dvc.lock``. It runs the pipeline's own body
(:func:`flows.pipeline.pipeline`'s function) inside its flow run, so the
stages are that run's tasks.

A run of a deployment is started by whoever can reach the Prefect server, with
parameters of their choosing: before anything else it is checked against what
the worker serves (:func:`flows.serving.check_deployment_run`), the record
`searchlab worker` puts in the environment of every run it executes
(:mod:`flows.worker`).
"""

import os
from pathlib import Path
from typing import Any, Literal

from prefect import flow

from flows.serving import SERVED, UntrustedRunError, check_deployment_run
from tasks.registry import STAGES

FLOW_NAME = "searchlab-pipeline"  # the name `searchlab serve` deploys under too: one flow in the Prefect UI
# The flow, as a module path (what `searchlab worker` loads, from its own installed code) and as a file path
# relative to the code's root (the entrypoint recorded in the deployment).
ENTRYPOINT = "flows.deployment.deployed_pipeline"
FILE_ENTRYPOINT = "flows/deployment.py:deployed_pipeline"

StageName = Literal[tuple(stage.name for stage in STAGES)]  # type: ignore[valid-type]  # an enum in the schema
PARAMETERS = ("params_file", "overrides", "stages", "force")


@flow(name=FLOW_NAME, persist_result=False, log_prints=True)
def deployed_pipeline(
    params_file: str = "params/default.yaml",
    overrides: list[str] = [],  # noqa: B006 (never mutated; a list default gives the UI a list field, not "or null")
    stages: list[StageName] = [],  # noqa: B006
    force: list[StageName] = [],  # noqa: B006
) -> dict[str, Any]:
    """Run the searchlab pipeline up to the chosen stages; cached stages do no work.

    Args:
        params_file: The params file, relative to the project root: one under params/ (or the one the worker serves).
        overrides: Param overrides, each KEY=VALUE as with `searchlab run --set` (e.g. corpus.world.seed=3).
            Endpoint URLs and secret-bearing keys (url, *_url, *_uri, *_env, trust_remote_code) only as in
            the worker's params.
        stages: The stages to bring up to date, with their upstream stages (empty: all stages).
        force: Stages to recompute even if cached; each must be among the run's stages.
    """
    from flows.pipeline import pipeline

    root = Path.cwd()  # `searchlab worker` runs every run in its project root (and checks it against the record)
    if not os.environ.get(SERVED):
        raise UntrustedRunError("this run comes from a deployment, but the worker running it was not started by "
                                "`searchlab worker` (nor `searchlab serve`), so there are no served params to check "
                                "it against: start the pool's workers with `searchlab worker --pool NAME`")
    check_deployment_run(root, params_file, list(overrides))
    return pipeline.fn(params_file=params_file, overrides=list(overrides), stages=list(stages), force=list(force),
                       root=str(root), record_dvc=True)
