"""The stage contract (docs/architecture.md), implemented once for every stage.

A :class:`Stage` declares what it reads (upstream stages, params sections, its
own code) and a ``build`` function from the library. :func:`run_stage` turns
that into a fingerprinted, cached, atomic, locked and resumable step:

1. fingerprint = hash(stage name, hash of its code, its params sections, upstream fingerprints, and the content of
   any file outside the pipeline it reads, such as an external benchmark);
2. if ``data/<stage>/manifest.json`` has that fingerprint and every file checks out: cached, no work;
3. otherwise take the build lock of that fingerprint (and look again: another run may just have built it), build
   into a scratch folder, write the manifest, and rename the folder into place;
4. ``data/.work/<stage>/resume-<fingerprint>/`` survives a crash so long builds continue where they stopped.

Concurrent runs: once a run has found or built ``data/<stage>/``, it holds that
folder's output lock shared until the run ends (:meth:`RunContext.release`),
and publishing a folder needs the lock exclusively. So a run never reads an
upstream folder that another run replaced after it was checked, and an output
is only ever recorded under the fingerprint of the inputs its build read. Runs
with different fingerprints build in parallel; the second one publishes when
the first has finished reading. Runs with the same fingerprint build once.
"""

from __future__ import annotations

import hashlib
import fnmatch
import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from searchlab.params import Params, flatten
from searchlab.progress import quiet_libraries
from tasks.estimate import work
from tasks.imports import module_file, project_modules
from tasks.locking import StageLock
from tasks.resources import ResourceMeter
from tasks.outputs import (
    content_digest,
    content_hashes,
    describe_files,
    publish,
    read_build_record,
    read_manifest,
    remember_published,
    verify,
    write_build_record,
    write_manifest,
)

log = logging.getLogger("searchlab")

# the names of the counts that are durations and speeds (``train_seconds``, ``tokens_per_s``): measurements
TIMINGS = ("*seconds*", "*_per_s")


@dataclass(frozen=True)
class StageContext:
    """What a stage's build function gets: its params, input folders, and where to write."""

    name: str
    params: Params
    root: Path
    inputs: dict[str, Path]  # upstream stage name -> its published output folder
    out_dir: Path  # empty scratch folder to fill; renamed into data/<stage>/ on success
    work_dir: Path  # survives a crash; same folder on every retry with the same fingerprint

    def accelerate_config(self) -> str | None:
        """The training stage's accelerate config file (its params section's ``accelerate_config``, from the project
        root), or None for accelerate's defaults."""
        config = getattr(self.params, self.name).accelerate_config
        return str(self.root / config) if config else None


def registered_as(section: str) -> Callable[[Params], tuple[str, str]]:
    """``Stage.registers`` of a model stage whose params section names its registry entry (``registry_name``,
    ``registry_alias``)."""
    def entry(params: Params) -> tuple[str, str]:
        settings = getattr(params, section)
        return settings.registry_name, settings.registry_alias

    return entry


@dataclass(frozen=True)
class Stage:
    """Declaration of one pipeline stage; ``tasks/registry.py`` lists them in pipeline order."""

    name: str
    description: str
    # the stages whose outputs the build reads: a fixed tuple, or computed from the params (rl starts from sft only
    # when rl.init says so); ``needs`` gives the answer for one params, the one graph every caller follows
    upstream: tuple[str, ...] | Callable[[Params], tuple[str, ...]]
    reads: tuple[str, ...]  # params sections that enter the fingerprint
    # returns counts to record and log; its module and all project code that imports enter the fingerprint
    build: Callable[[StageContext], dict[str, Any]]
    reports: tuple[str, ...] = ()  # files of the output folder to attach to the stage's MLflow run
    curves: str | None = None  # a JSONL file of the output ({"step", metric: value, ...}) logged as MLflow curves
    # (registered model name, alias) from params: the output folder becomes a version in the MLflow Model Registry
    registers: Callable[[Params], tuple[str, str]] | None = None
    # files and folders outside data/ that the build reads, named as the params give them ({label: path}); their
    # content enters the fingerprint. Raises ValueError naming the params key of one that is missing.
    external: Callable[[Params, Path], dict[str, Path]] | None = None
    # a JSON file of the output holding the stage's results: dvc.yaml declares it as DVC metrics, and its numbers
    # are logged as MLflow metrics (named by ``metric_names``, else by their JSON path joined with "/")
    metrics: str | None = None
    metric_names: Callable[[Any], dict[str, float]] | None = None
    # which of those the pipeline's own MLflow run carries, to compare runs at a glance (default: none)
    headline: Callable[[Any], dict[str, float]] | None = None
    # the counts (``fnmatch`` patterns of their names) that measure how the build ran, not what it made: they go to
    # the build record, not the manifest, so two builds of the same inputs write the same manifest
    measured: tuple[str, ...] = TIMINGS
    # folders of the output whose bytes differ between two builds of one content (Lucene's segment ids): left out
    # of the content hash, so the build must write a digest of their content into a file that is hashed
    unhashed: tuple[str, ...] = ()
    # the params this stage cannot run with together, beyond what one section's schema can see (another section's
    # value): ``(key, why)`` for each, found by the preflight before any stage runs
    rules: Callable[[Params], Iterator[tuple[str, str]]] | None = None

    def needs(self, params: Params) -> tuple[str, ...]:
        """The upstream stages this stage reads under ``params``."""
        return self.upstream(params) if callable(self.upstream) else self.upstream


@dataclass
class RunContext:
    """Everything one pipeline run shares across its stages."""

    root: Path
    params: Params
    force: frozenset[str] = frozenset()
    tracker: Any = None  # tasks.tracking.Tracker, or None to run untracked
    parent_run_id: str | None = None
    flow_run_id: str | None = None
    git_commit: str = "unknown"
    profile: str = ""  # the params file's stem: stage runs are named "<profile> · <stage>" in MLflow
    on_wait: Callable[[str], None] = field(default=lambda message: log.info(message))
    # output locks held shared on the stage folders this run has checked or built (see the module doc)
    held: dict[str, StageLock] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.root / self.params.runtime.data_dir

    def lock(self, name: str, what: str, shared: bool = False) -> StageLock:
        """An unacquired lock ``data/.work/locks/<name>.lock`` with this run's timeout and wait messages."""
        return StageLock(self.work_root / "locks" / f"{name}.lock", holder=f"searchlab run, {what}",
                         timeout_s=self.params.runtime.lock_timeout_s, shared=shared,
                         on_wait=lambda who: self.on_wait(f"{what}: waiting for {who}"))

    def release(self) -> None:
        """Let other runs replace the stage folders this run used; call when the run ends."""
        for lock in self.held.values():
            lock.release()
        self.held.clear()

    def __enter__(self) -> "RunContext":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @property
    def work_root(self) -> Path:
        return self.data_dir / ".work"


@dataclass(frozen=True)
class StageResult:
    """What a stage run returns: its manifest (paths, hashes, counts; never the data), whether it was cached, and
    the record of the build that made the output (its seconds and measurements; empty if none came with it)."""

    manifest: dict[str, Any]
    cached: bool
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float | None:
        """How long the build of the output took (None: no build record came with it)."""
        return self.record.get("seconds")

    @property
    def measured(self) -> dict[str, Any]:
        return self.record.get("measured", {})

    @property
    def resources(self) -> dict[str, float]:
        """The build's ``cpu_seconds``, ``peak_rss_mb`` and ``workers_peak_rss_mb`` (:mod:`tasks.resources`)."""
        return self.record.get("resources", {})


# ------------------------------------------------------------------ fingerprints
def code_files(stage: Stage) -> list[Path]:
    """The source files a stage's fingerprint (and its DVC dependencies) cover: the module of its ``build`` function
    and every project module that imports, found from the imports themselves (:mod:`tasks.imports`)."""
    return [module_file(name) for name in project_modules(stage.build.__module__)]


@cache
def _hash_code(paths: tuple[Path, ...], root: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def code_hash(stage: Stage, root: Path) -> str:
    """Hash of the stage's source files (paths and bytes); changes whenever its code does."""
    return _hash_code(tuple(code_files(stage)), root)


def fingerprint_inputs(stage: Stage, params: Params, root: Path, upstream: dict[str, str]) -> dict[str, Any]:
    """Everything the fingerprint covers, as data (kept in the manifest so ``status`` can say what changed)."""
    inputs = {
        "stage": stage.name,
        "code": code_hash(stage, root),
        "params": {section: params.fingerprinted(section) for section in stage.reads},
        "upstream": {name: upstream[name] for name in stage.needs(params)},
    }
    if stage.external is not None:  # only then: the fingerprints of stages without external inputs stay as they were
        stat_cache = root / params.runtime.data_dir / ".work" / "stat" / f"{stage.name}.external.json"
        inputs["external"] = content_hashes(stage.external(params, root), stat_cache)
    return inputs


def fingerprint(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------ the contract
def check_cached(out: Path, fp: str, stat_cache: Path) -> tuple[dict[str, Any] | None, str]:
    """Return (manifest, "") if ``out`` is a complete output with fingerprint ``fp``, else (None, why not)."""
    manifest = read_manifest(out)
    if manifest is None:
        return None, "no output" if not out.exists() else "output has no readable manifest"
    if manifest["fingerprint"] != fp:
        return None, "inputs changed"
    problem = verify(out, manifest, stat_cache)
    if problem:
        return None, f"output is corrupt: {problem}"
    return manifest, ""


def run_stage(stage: Stage, ctx: RunContext, upstream: dict[str, StageResult]) -> StageResult:
    """Bring ``data/<stage>/`` up to date with the current params and upstream outputs; see the module doc.

    On return, this run holds the folder's output lock shared (released by :meth:`RunContext.release`).
    """
    quiet_libraries()  # whoever runs the stage (the CLI, a Prefect worker): its own progress lines, not per-call bars
    inputs = fingerprint_inputs(stage, ctx.params, ctx.root, {n: r.manifest["fingerprint"] for n, r in upstream.items()})
    fp = fingerprint(inputs)
    forced = stage.name in ctx.force
    while True:
        if not forced:
            found = _find_cached(stage, ctx, fp)
            if found is not None:
                return _cached(stage, ctx, found)
        with ctx.lock(f"{stage.name}-{fp[:16]}", f"stage {stage.name}"):
            if not forced:  # another run may have built it while we waited
                found = _find_cached(stage, ctx, fp)
                if found is not None:
                    return _cached(stage, ctx, found)
            result = _build_and_publish(stage, ctx, inputs, fp)
        if result is not None:
            return result
        forced = False  # another run replaced the output as we published ours: look again


def prune_abandoned(ctx: RunContext, stage: str) -> None:
    """Remove the stage's resume folders that no run is building: once the stage is published, the checkpoints of
    an interrupted build under other inputs would never be resumed unless those inputs come back (a folder whose
    build lock another run holds is in use and stays)."""
    for folder in sorted((ctx.work_root / stage).glob("resume-*")):
        building = ctx.lock(f"{stage}-{folder.name.removeprefix('resume-')}", f"stage {stage} (pruning)")
        if building.try_acquire():
            try:
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                building.release()


def _find_cached(stage: Stage, ctx: RunContext, fp: str) -> dict[str, Any] | None:
    """The output's manifest if ``data/<stage>/`` holds fingerprint ``fp`` intact; then its output lock stays held."""
    reading = ctx.lock(f"{stage.name}.output", f"stage {stage.name}", shared=True).acquire()
    manifest, _ = check_cached(ctx.data_dir / stage.name, fp, ctx.work_root / "stat" / f"{stage.name}.json")
    if manifest is None:
        reading.release()
        return None
    _hold(ctx, stage.name, reading)
    return manifest


def _hold(ctx: RunContext, name: str, lock: StageLock) -> None:
    previous = ctx.held.pop(name, None)
    if previous is not None:
        previous.release()
    ctx.held[name] = lock


def _build_and_publish(stage: Stage, ctx: RunContext, inputs: dict[str, Any], fp: str) -> StageResult | None:
    """Build the stage into a scratch folder and publish it as ``data/<stage>/``, holding the build lock of ``fp``.

    Returns None when another run replaced the published folder before this run could lock it for reading.
    """
    out = ctx.data_dir / stage.name
    stage_work = ctx.work_root / stage.name
    stat_cache = ctx.work_root / "stat" / f"{stage.name}.json"
    scratch = _fresh_scratch(stage_work, fp)
    resume = stage_work / f"resume-{fp[:16]}"
    resume.mkdir(parents=True, exist_ok=True)
    run_id = _start_tracking(stage, ctx, fp, cached=False)
    started = time.time()
    try:
        with ResourceMeter() as meter:
            counts = stage.build(StageContext(stage.name, ctx.params, ctx.root,
                                              {n: ctx.data_dir / n for n in stage.needs(ctx.params)}, scratch, resume))
        files = describe_files(scratch)
        content = content_digest(files, stage.unhashed)
        if _same_output(out, fp, content, stat_cache):
            # A forced rebuild that reproduced the output's content: the published folder (and its record of the
            # run that made it) stays, so DVC sees nothing change.
            shutil.rmtree(scratch)
            publishing = None
        else:
            counts, measured = split_measured(counts or {}, stage.measured)
            manifest = {"stage": stage.name, "fingerprint": fp, "inputs": inputs, "counts": counts, "files": files,
                        "content": content}
            record = {"seconds": round(time.time() - started, 3), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      "git_commit": ctx.git_commit, "mlflow_run_id": run_id, "prefect_flow_run_id": ctx.flow_run_id,
                      "resources": meter.figures(), "measured": measured,
                      "work": work(stage.name, ctx.params, ctx.root)}  # what the plan's next estimate scales
            write_manifest(scratch, manifest)
            write_build_record(scratch, record)
            publishing = _publish_locked(stage, ctx, scratch, out)
    except BaseException as error:
        shutil.rmtree(scratch, ignore_errors=True)
        if run_id:
            ctx.tracker.finish_failed(run_id, error)
        raise
    shutil.rmtree(resume, ignore_errors=True)
    prune_abandoned(ctx, stage.name)
    if publishing is None:
        manifest = _find_cached(stage, ctx, fp)
    elif (read_manifest(out) or {}).get("fingerprint") == fp:
        _hold(ctx, stage.name, publishing)
        remember_published(out, manifest, stat_cache)  # the next no-op run then only stats files
    else:  # another run published between the downgrade's two steps
        publishing.release()
        manifest = None
    if manifest is None:
        if run_id:
            ctx.tracker.finish_stage(run_id, status="FAILED")
        return None
    result = StageResult(manifest, cached=False, record=read_build_record(out))
    if run_id:
        _finish_tracking(stage, ctx, run_id, out, result)
    return result


def _fresh_scratch(stage_work: Path, fp: str) -> Path:
    """A new scratch folder for a build of ``fp``, after removing those of ``fp`` that runs which died left (the
    caller holds the build lock of ``fp``, so no live run owns one)."""
    for stale in stage_work.glob(f"tmp-{fp[:16]}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    scratch = stage_work / f"tmp-{fp[:16]}-{uuid.uuid4().hex[:12]}"
    scratch.mkdir(parents=True)
    return scratch


def _publish_locked(stage: Stage, ctx: RunContext, scratch: Path, out: Path):
    """Publish ``scratch`` as ``out`` once no other run reads the folder it replaces; the output lock, downgraded
    to a read lock (released if publishing fails)."""
    publishing = ctx.lock(f"{stage.name}.output", f"stage {stage.name} (publishing)").acquire()
    try:
        publish(scratch, out, ctx.work_root / stage.name / "trash")
    except BaseException:
        publishing.release()
        raise
    publishing.downgrade()
    return publishing


def split_measured(counts: dict[str, Any], measured: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(content counts, measurements)``: the counts whose names match a ``measured`` pattern go to the second."""
    def is_measured(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in measured)

    return ({k: v for k, v in counts.items() if not is_measured(k)},
            {k: v for k, v in counts.items() if is_measured(k)})


def _same_output(out: Path, fp: str, content: str, stat_cache: Path) -> bool:
    """Whether ``data/<stage>/`` holds fingerprint ``fp`` intact, with this content hash."""
    published, _ = check_cached(out, fp, stat_cache)
    return published is not None and published.get("content") == content


def _finish_tracking(stage: Stage, ctx: RunContext, run_id: str, out: Path, result: StageResult) -> None:
    """Close the stage's MLflow run: metrics, curves, report files, and the registry entry of a model stage."""
    manifest = result.manifest
    reports = [str(out / name) for name in stage.reports if (out / name).is_file()]
    curves = []
    if stage.curves and (out / stage.curves).is_file():
        curves = [json.loads(line) for line in (out / stage.curves).read_text().splitlines() if line.strip()]
    ctx.tracker.finish_stage(run_id, metrics={**_metrics(result), **_result_metrics(stage, out)},
                             artifacts=reports, curves=curves)
    if stage.registers is not None:
        name, alias = stage.registers(ctx.params)
        rel = out.relative_to(ctx.root).as_posix() if out.is_relative_to(ctx.root) else str(out)
        # the tracker snapshots the folder and tags the version with its content hash (tasks/model_store.py)
        ctx.tracker.register_model(run_id, name, alias, out, manifest["files"],
                                   {"searchlab.path": rel, "searchlab.stage": stage.name,
                                    "searchlab.fingerprint": manifest["fingerprint"]})


def _cached(stage: Stage, ctx: RunContext, manifest: dict[str, Any]) -> StageResult:
    result = StageResult(manifest, cached=True, record=read_build_record(ctx.data_dir / stage.name))
    run_id = _start_tracking(stage, ctx, manifest["fingerprint"], cached=True,
                             producer=result.record.get("mlflow_run_id"),
                             origin={k: result.record.get(k) for k in ("finished_at", "git_commit")})
    if run_id:
        # the results too: this pipeline run's stage run then shows the results its run used, cached or not
        ctx.tracker.finish_stage(run_id, metrics={**_metrics(result),
                                                  **_result_metrics(stage, ctx.data_dir / stage.name)})
    return result


def _metrics(result: StageResult) -> dict[str, float]:
    """A stage run's own figures: its manifest's counts as ``counts/<name>`` (``protocol.searched`` →
    ``counts/protocol/searched``), its build's measurements under their own names (``tokens_per_s``,
    ``throughput/sft-agent/questions_per_s``), its ``seconds``, CPU time and peak memory, and ``output_bytes``."""
    metrics = {prefix + k.replace(".", "/"): float(v)
               for prefix, numbers in (("counts/", result.manifest["counts"]), ("", result.measured),
                                       ("", result.resources))
               for k, v in numbers.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if result.seconds is not None:
        metrics["seconds"] = float(result.seconds)
    metrics["output_bytes"] = float(sum(f["size"] for f in result.manifest["files"].values()))
    return metrics


def _result_metrics(stage: Stage, out: Path) -> dict[str, float]:
    """The MLflow metrics of the stage's ``metrics`` file (none if it declares none)."""
    if stage.metrics is None:
        return {}
    if not (out / stage.metrics).is_file():  # the output is published already: say so, but do not fail the run
        log.warning("stage %s: its metrics file %s is missing; no results logged to MLflow", stage.name, stage.metrics)
        return {}
    data = json.loads((out / stage.metrics).read_text())
    return stage.metric_names(data) if stage.metric_names else _numbers(data)


def pipeline_metrics(stages: list[Stage], results: dict[str, StageResult], data_dir: Path) -> dict[str, float]:
    """The figures of a whole pipeline run, for its own MLflow run (so that two runs compare side by side): the
    headline counts of each stage that ran (those without a breakdown dot) as ``stages/<stage>/<count>``, its
    seconds, and the headline of its results (evaluate: EM with its 95% interval per benchmark, model and system,
    whose ``eval/`` names MLflow's compare view then lists first)."""
    metrics: dict[str, float] = {}
    for stage in stages:
        result = results.get(stage.name)
        if result is None:
            continue
        counts = result.manifest["counts"]
        metrics.update({f"stages/{stage.name}/{k}": float(v) for k, v in counts.items()
                        if "." not in k and isinstance(v, (int, float)) and not isinstance(v, bool)})
        if result.seconds is not None:
            metrics[f"stages/{stage.name}/seconds"] = float(result.seconds)
        metrics.update({f"stages/{stage.name}/{k}": float(v) for k, v in result.resources.items()})
        results_file = data_dir / stage.name / (stage.metrics or "")
        if stage.headline and stage.metrics and results_file.is_file():
            metrics.update(stage.headline(json.loads(results_file.read_text())))
    return metrics


def _numbers(data: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON value under its path joined with "/": ``{"a": {"b": 1}}`` → ``{"a/b": 1.0}``."""
    if isinstance(data, bool):  # a bool is an int to Python, not a metric
        return {}
    if isinstance(data, (int, float)):
        return {prefix: float(data)}
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    return {name: value for key, item in items
            for name, value in _numbers(item, f"{prefix}/{key}" if prefix else str(key)).items()}


def _start_tracking(stage: Stage, ctx: RunContext, fp: str, cached: bool, producer: str | None = None,
                    origin: dict[str, Any] | None = None) -> str | None:
    if ctx.tracker is None:
        return None
    params = {f"{section}.{k}": v for section in stage.reads for k, v in flatten(ctx.params.section(section)).items()}
    tags = {
        "searchlab.stage": stage.name,
        "searchlab.fingerprint": fp,
        "searchlab.cached": str(cached).lower(),
        "searchlab.git_commit": ctx.git_commit,
        "prefect.flow_run_id": ctx.flow_run_id or "",
    }  # the tracker adds the owning process (searchlab.pid, .host, .pid_started)
    if producer:
        tags["searchlab.produced_by_run"] = producer
    if ctx.profile:
        tags["searchlab.profile"] = ctx.profile
    name = f"{ctx.profile} · {stage.name}" if ctx.profile else stage.name
    return ctx.tracker.start_stage(ctx.parent_run_id, name, params, tags, produced_by=producer, origin=origin)


# ------------------------------------------------------------------ status
def pipeline_status(stages: list[Stage], params: Params, root: Path) -> list[dict[str, Any]]:
    """For each stage: ``cached``, ``stale`` or ``missing``, and why (which param, code or upstream changed).

    A stage whose upstream will rerun is stale too, since its fingerprint covers the upstream's.
    """
    data_dir = root / params.runtime.data_dir
    fingerprints: dict[str, str] = {}
    rows = []
    for stage in stages:
        inputs = fingerprint_inputs(stage, params, root, {n: fingerprints[n] for n in stage.needs(params)})
        fp = fingerprints[stage.name] = fingerprint(inputs)
        out = data_dir / stage.name
        manifest, why = check_cached(out, fp, data_dir / ".work" / "stat" / f"{stage.name}.json")
        own = data_dir / ".work" / stage.name / f"resume-{fp[:16]}"
        others = [folder for folder in own.parent.glob("resume-*") if folder != own]
        work = {"resume_bytes": folder_bytes(own) if own.is_dir() else 0, "abandoned": len(others),
                "abandoned_bytes": sum(map(folder_bytes, others))}
        if manifest is not None:
            rows.append({"stage": stage.name, "state": "cached", "why": [], "built": read_build_record(out), **work})
            continue
        recorded = read_manifest(out)
        if recorded is None or why.startswith("output is corrupt"):
            rows.append({"stage": stage.name, "state": "missing", "why": [why], **work})
        else:
            rows.append({"stage": stage.name, "state": "stale", "why": explain_change(recorded.get("inputs", {}), inputs),
                         **work})
    return rows


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def cached_stages(stages: list[Stage], params: Params, root: Path) -> set[str]:
    """The names of ``stages`` (a whole pipeline, upstream first) whose output is up to date with ``params``."""
    try:
        return {row["stage"] for row in pipeline_status(stages, params, root) if row["state"] == "cached"}
    except ValueError:  # an external input is missing: no output that reads it can be vouched for
        return set()


def explain_change(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprint inputs."""
    reasons = []
    if old.get("code") != new["code"]:
        reasons.append("code changed")
    old_params = flatten(old.get("params", {}))
    new_params = flatten(new["params"])
    for key in sorted(set(old_params) | set(new_params)):
        if old_params.get(key, "<unset>") != new_params.get(key, "<unset>"):
            reasons.append(f"param {key}: {old_params.get(key, '<unset>')!r} -> {new_params.get(key, '<unset>')!r}")
    for name, fp in new["upstream"].items():
        if old.get("upstream", {}).get(name) != fp:
            reasons.append(f"upstream {name} changed")
    for label, content in new.get("external", {}).items():
        if old.get("external", {}).get(label) != content:
            reasons.append(f"input {label} changed")
    return reasons or ["fingerprint changed"]
