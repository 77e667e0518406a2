"""Two small real stages for testing the stage machinery: ``alpha`` writes shards, ``beta`` reads alpha.

Behaviour is steered through files so that separate processes can share it:
``<root>/calls.log`` gets one line per build, ``<root>/crash_after`` makes alpha
raise after that many shards, ``<root>/pause`` makes alpha sleep mid-write.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from searchlab.params import load_params
from tasks.stage import RunContext, Stage, StageContext, StageResult, run_stage

SHARDS = 6


def _log_call(ctx: StageContext) -> None:
    with open(ctx.root / "calls.log", "a") as f:
        f.write(ctx.name + "\n")


def build_alpha(ctx: StageContext) -> dict:
    _log_call(ctx)
    crash_after = int((ctx.root / "crash_after").read_text()) if (ctx.root / "crash_after").exists() else None
    reused = 0
    for i in range(SHARDS):
        shard = ctx.work_dir / f"shard-{i}.json"
        if shard.exists():
            reused += 1
            continue
        if crash_after is not None and i >= crash_after:
            raise RuntimeError(f"crash before shard {i}")
        shard.write_text(json.dumps({"i": i, "entities": ctx.params.corpus.world.entities}))
    with open(ctx.out_dir / "items.jsonl", "w") as out:
        for i in range(SHARDS):
            out.write((ctx.work_dir / f"shard-{i}.json").read_text() + "\n")
            out.flush()
            if (ctx.root / "pause").exists():
                time.sleep(float((ctx.root / "pause").read_text()))
    return {"items": SHARDS, "reused_shards": reused}


def build_beta(ctx: StageContext) -> dict:
    _log_call(ctx)
    if (ctx.root / "pause_beta").exists():  # before reading alpha: another run may try to replace it meanwhile
        time.sleep(float((ctx.root / "pause_beta").read_text()))
    lines = (ctx.inputs["alpha"] / "items.jsonl").read_text().splitlines()
    (ctx.out_dir / "summary.json").write_text(json.dumps({"n": len(lines), "threads": ctx.params.index.threads}))
    (ctx.out_dir / "log.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5, "eval_loss": 1.7}\n')
    return {"lines": len(lines), "entities_read": json.loads(lines[0])["entities"]}


ALPHA = Stage("alpha", "toy source stage", (), ("corpus",), build_alpha)
BETA = Stage("beta", "toy downstream stage", ("alpha",), ("index",), build_beta,
             reports=("summary.json",), curves="log.jsonl", registers=lambda params: ("toy-model", "current"),
             metrics="summary.json")


def run_both(root: Path, overrides: list[str] = (), force: frozenset[str] = frozenset()) -> dict[str, StageResult]:
    """Run alpha then beta like the pipeline flow does (without Prefect)."""
    params = load_params(root / "params.yaml", list(overrides))
    results: dict[str, StageResult] = {}
    with RunContext(root=root, params=params, force=force) as ctx:
        for stage in (ALPHA, BETA):
            results[stage.name] = run_stage(stage, ctx, {n: results[n] for n in stage.upstream})
    return results


if __name__ == "__main__":  # used by tests that need a separate (killable) process: ROOT [OVERRIDE...]
    out = run_both(Path(sys.argv[1]), sys.argv[2:])
    print(json.dumps({name: {"cached": r.cached, "fingerprint": r.manifest["fingerprint"], "counts": r.manifest["counts"],
                             "upstream": r.manifest["inputs"]["upstream"]} for name, r in out.items()}))
