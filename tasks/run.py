"""The Prefect task that runs any stage under the stage contract."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed

from tasks.stage import RunContext, Stage, StageResult, run_stage


def stage_task(stage: Stage):
    """A Prefect task running ``stage`` under the stage contract; a cached stage finishes in state Cached."""

    def run(ctx: RunContext, upstream: dict[str, StageResult]):
        result = run_stage(stage, ctx, upstream)
        if result.cached:
            return Completed(name="Cached", data=result,
                             message=f"fingerprint {result.manifest['fingerprint'][:12]} unchanged: no work done")
        return result

    # Our own fingerprint cache replaces Prefect's: its cache keys ignore helper code and deleted folders.
    return task(run, name=stage.name, task_run_name=stage.name, cache_policy=NO_CACHE, persist_result=False,
                log_prints=True)
