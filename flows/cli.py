"""The ``searchlab`` command line: run the pipeline, inspect it, search the index, serve, and open the UIs.

Heavy imports (Prefect, MLflow, the JVM) happen inside the commands that need
them, so ``searchlab search`` and ``searchlab status`` start fast.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flows.runtime import UI_STATE, configure_prefect, find_root, running_ui
from searchlab.params import Params, ParamsError, load_params
from searchlab.progress import quiet_libraries

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="searchlab: a reproducible pipeline for training LLM search agents.")
console = Console()
err_console = Console(stderr=True)

ParamsOpt = Annotated[str, typer.Option("--params", "-p", help="params file, relative to the project root")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", "-s", help="override a param: KEY=VALUE (repeatable)")]
DEFAULT_PARAMS = "params/default.yaml"


def _load(root: Path, params_file: str, overrides: list[str] | None) -> Params:
    try:
        return load_params(root / params_file, overrides or [])
    except ParamsError as err:
        raise _fail(str(err), 2) from None


def _check_port(port: int | None, flag: str) -> None:
    """Refuse a ``flag`` value that is no TCP port, in one line, before anything starts."""
    if port is not None and not 1 <= port <= 65535:
        raise _fail(f"{flag} {port}: a port is a number from 1 to 65535", 2)


def _check_cron(cron: str | None) -> None:
    """Refuse a ``--cron`` that is no cron schedule, in one line, before a server is asked or a pool is made."""
    if cron is None:
        return
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    try:
        CronSchedule(cron=cron)
    except ValidationError:
        raise _fail(f"--cron {cron!r}: not a cron schedule; five fields, minute hour day-of-month month "
                    "day-of-week, e.g. '0 3 * * *' (03:00 every day)", 2) from None


def _fail(message: str, code: int = 1) -> typer.Exit:
    # escape: a message quoting `--set eval.suites=[x]` is text, not markup; soft_wrap: a long path stays whole
    # (the terminal wraps it), so it can be copied from the message
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@app.command()
def run(
    stages: Annotated[Optional[list[str]], typer.Argument(help="stages to bring up to date (default: all)")] = None,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    force: Annotated[Optional[list[str]], typer.Option("--force", "-f", help="recompute this stage even if cached")] = None,
    no_dvc_commit: Annotated[bool, typer.Option("--no-dvc-commit", help="do not record outputs in dvc.lock (used by dvc repro)")] = False,
) -> None:
    """Run the pipeline through Prefect up to the named stages (default: evaluate and the stages it needs under the
    params); cached stages do no work. The checks of `searchlab plan` run first: any problem stops the run."""
    root = find_root()
    params = _load(root, params_file, overrides)  # fail fast, before Prefect starts
    from tasks.preflight import preflight
    from tasks.registry import check_force

    found = preflight(params, Path(params_file), root, stages or [], overrides or [])
    if found.problems:
        raise _fail(_problems_text(found.problems), 2)
    try:
        check_force(force or [], found.stages)
    except ValueError as err:
        raise _fail(str(err), 2) from None
    from tasks.tracking import prestart

    prestart(params.tracking, root)  # MLflow loads in its own process while Prefect starts
    configure_prefect(root, params.runtime.prefect_api_url)
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from prefect import tags

    from flows.links import params_tag
    from flows.pipeline import pipeline
    from flows.signals import Terminated, ending_on_signals

    started = time.time()
    try:
        # The heartbeat thread would hold every run ~1 s at its end for nothing.
        # tagged from its creation, so a run that fails before any stage still says which params it ran
        with ending_on_signals(), temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}), \
                tags(params_tag(params_file)):
            summary = pipeline(params_file=params_file, overrides=overrides or [], stages=stages or [],
                               force=force or [], root=str(root), record_dvc=not no_dvc_commit)
    except KeyboardInterrupt as err:
        how, status = (f"terminated ({err})", err.exit_status) if isinstance(err, Terminated) else \
            ("interrupted (Ctrl-C)", 130)
        raise _fail(f"{how}; the stage in progress stopped and its MLflow run is marked KILLED. Run the same "
                    "command again to go on: finished stages are cached, training resumes from its last checkpoint",
                    status) from None
    except Exception as err:  # the flow already logged the traceback; end with one clear line
        from searchlab.files import no_space_message

        raise _fail(no_space_message(err, root / params.runtime.data_dir) or f"{type(err).__name__}: {err}") from None
    console.print(_summary_table(summary, time.time() - started))
    data_dir = root / params.runtime.data_dir
    console.print(f"data:    {data_dir}/{{{','.join(summary)}}}  (manifest.json in each)")
    ui = running_ui(root)
    if ui:
        console.print(f"Prefect: {ui['prefect_ui_url']}   MLflow: {ui['mlflow_url']}")
    else:
        console.print("Prefect and MLflow UIs: run `searchlab ui` (runs recorded in .prefect/ and mlflow.db)")
    if "index" in summary:
        console.print("search:  searchlab search \"your question\"")
    if "evaluate" in summary:
        _print_results(data_dir / "evaluate")


def _summary_table(summary: dict[str, dict], seconds: float) -> Table:
    """The run's table: one row per stage, cached or computed, its time, CPU, memory and headline counts."""
    table = Table(title=f"searchlab run ({seconds:.1f} s)")
    for column in ("stage", "state", "seconds", "cpu s", "peak RSS", "counts"):
        table.add_column(column)
    for name, row in summary.items():
        state = "[dim]cached[/dim]" if row["cached"] else "[green]computed[/green]"
        # headline counts and measurements only (breakdowns such as rejected.* stay in the manifest and MLflow)
        counts = ", ".join(f"{k}={v}" for k, v in {**row["counts"], **row["measured"]}.items() if "." not in k)
        took = "?" if row["seconds"] is None else f"{row['seconds']:.1f}"
        used = row.get("resources") or {}
        cpu = f"{used['cpu_seconds']:.0f}" if "cpu_seconds" in used else "?"
        rss = f"{used['peak_rss_mb'] / 1024:.2f} GB" if "peak_rss_mb" in used else "?"
        table.add_row(name, state, took, cpu, rss, counts)
    return table


def _print_results(folder: Path) -> None:
    """The evaluation's results table (metrics.json as in report.md), printed as Markdown."""
    results = json.loads((folder / "metrics.json").read_text())
    _print_results_table(results, f"\nevaluation ({folder}/report.md, metrics.json; "
                                  "compare runs: searchlab compare RUN RUN):")


def _print_results_table(results: dict, title: str) -> None:
    """A title line, then the results table of ``results`` (metrics.json's shape) as Markdown."""
    from searchlab.eval.report import results_table

    console.print(title, highlight=False, markup=False, soft_wrap=True)
    console.print(results_table(results), markup=False, highlight=False, soft_wrap=True)


@app.command()
def results(
    runs: Annotated[Optional[list[str]], typer.Argument(
        help="MLflow run ids: pipeline runs, or their evaluate stage runs "
             "(default: the project's latest evaluation)")] = None,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Print the evaluation's results table: the project's latest (data/evaluate/metrics.json), or MLflow runs'."""
    root = find_root()
    params = _load(root, params_file, overrides)
    if not runs:
        folder = root / params.runtime.data_dir / "evaluate"
        if not (folder / "metrics.json").is_file():
            raise _fail(f"no evaluation results: {folder / 'metrics.json'} does not exist; "
                        "run `searchlab run evaluate` first (or give MLflow run ids)")
        _print_results(folder)
        return
    from flows.results import run_results
    from tasks.tracking import TrackingError

    failed = False
    for run_id in runs:
        try:
            found, source = run_results(params.tracking, root, run_id)
        except TrackingError as err:
            err_console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False, soft_wrap=True)
            failed = True
            continue
        _print_results_table(found, f"\nrun {run_id} ({source}):")
    if failed:
        raise typer.Exit(1)


def _problems_text(problems: list) -> str:
    """The message of a preflight that found ``problems``: one line each."""
    return f"{len(problems)} problem(s) found before any stage ran:\n  " + "\n  ".join(map(str, problems))


STATE_COLOUR = {"cached": "green", "stale": "yellow", "missing": "red"}


def _built(record: dict | None) -> str:
    """`  built in 12.3 s (cpu 20 s, peak RSS 1.20 GB)` from a build record; empty without one."""
    if not record or record.get("seconds") is None:
        return ""
    used = record.get("resources") or {}
    extra = f" (cpu {used['cpu_seconds']:.0f} s, peak RSS {used['peak_rss_mb'] / 1024:.2f} GB)" if used else ""
    return f"  built in {record['seconds']:.1f} s{extra}"


@app.command()
def status(params_file: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None) -> None:
    """Show each stage the params need as cached, stale or missing, and for stale ones what changed; the stages
    nothing needs under these params are listed as such."""
    root = find_root()
    params = _load(root, params_file, overrides)
    from tasks.registry import STAGES, plan
    from tasks.stage import folder_bytes, pipeline_status

    todo = plan([], params)
    try:
        rows = pipeline_status(todo, params, root)
    except ValueError as err:  # an external input (benchmark file, model folder) is missing
        raise _fail(str(err), 2) from None
    for row in rows:
        console.print(f"{row['stage']:<12} [{STATE_COLOUR[row['state']]}]{row['state']}[/]{_built(row.get('built'))}")
        for reason in row["why"]:
            console.print(f"{'':<12} {reason}", highlight=False)
        if row["resume_bytes"]:
            console.print(f"{'':<12} an interrupted build resumes from its work folder ({_mb(row['resume_bytes'])})")
        if row["abandoned"]:
            console.print(f"{'':<12} {row['abandoned']} abandoned resume folder(s) of other inputs "
                          f"({_mb(row['abandoned_bytes'])}): removed when the stage is next built", highlight=False,
                          soft_wrap=True)
    unused = [stage.name for stage in STAGES if stage not in todo]
    if unused:
        console.print(f"[dim]not needed under these params: {', '.join(unused)}[/dim]")
    work = root / params.runtime.data_dir / ".work"
    if work.is_dir():
        console.print(f"[dim]work folder {work}: {_mb(folder_bytes(work))}[/dim]", highlight=False)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    """``0 s``, ``42 s``, ``7 min``, ``1 h 05``: as precise as an estimate is."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d}"


@app.command("plan")
def plan_command(
    stages: Annotated[Optional[list[str]], typer.Argument(help="stages to plan for (default: evaluate)")] = None,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """A dry run: the stages that would run, in order, cached or not, with their inputs; then every problem with
    the inputs (files that are missing or do not parse, params that cannot work together), each with its key and
    where it is set. Trains nothing. Exit code 2 on any problem."""
    root = find_root()
    params = _load(root, params_file, overrides)
    from tasks.dvc import rewrites_dvc_yaml
    from tasks.estimate import estimate
    from tasks.preflight import preflight
    from tasks.stage import pipeline_status

    found = preflight(params, Path(params_file), root, stages or [], overrides or [])
    states = {}
    if not any(not p.machine for p in found.problems):
        states = {row["stage"]: row for row in pipeline_status(found.stages, params, root)}
    sets = "".join(f" --set {o}" for o in overrides or [])
    console.print(f"plan for {escape(params_file + sets)}:", highlight=False, soft_wrap=True)
    total = 0.0
    for number, stage in enumerate(found.stages, start=1):
        row = states.get(stage.name)
        state = row["state"] if row else "unchecked"
        colour = STATE_COLOUR.get(state, "dim")
        upstream = ", ".join(stage.needs(params)) or "-"
        expected = estimate(stage.name, params, root, cached=state == "cached")
        total += expected.seconds
        console.print(f"{number:>2}. {stage.name:<11} [{colour}]{state:<9}[/] {_duration(expected.seconds):>7} "
                      f"[dim]({expected.basis})[/dim]  upstream: {upstream}; params: {', '.join(stage.reads)}",
                      highlight=False, soft_wrap=True)
    console.print(f"estimated time on this machine: {_duration(total)} (each stage: the speed of its earlier build "
                  f"in {params.runtime.data_dir}/, else one measured on a 2-core CPU)", highlight=False, soft_wrap=True)
    if rewrites_dvc_yaml(params, root):
        console.print(f"[yellow]note:[/yellow] this stage graph is not the committed dvc.yaml's (the demo's), and "
                      f"a run into {params.runtime.data_dir}/ rewrites it; to keep both, give the profile a data "
                      f"folder of its own: runtime.data_dir: data-{Path(params_file).stem}", highlight=False,
                      soft_wrap=True)
    console.print("inputs:", highlight=False)
    for key, what in found.inputs.items():
        console.print(f"    {escape(key)}: {escape(what)}", highlight=False, soft_wrap=True)
    for note in (p for p in found.problems if p.machine):
        console.print(f"[yellow]note:[/yellow] the machine that runs it needs what this one lacks: {escape(str(note))}",
                      highlight=False, soft_wrap=True)
    problems = [p for p in found.problems if not p.machine]
    if problems:
        raise _fail(_problems_text(problems), 2)
    console.print("[green]no problem found[/green]")


def _open_retriever(root: Path, params: Params):
    from searchlab.retrieval import open_retriever

    try:
        return open_retriever(params.retriever, root / params.runtime.data_dir / "index")
    except (FileNotFoundError, ValueError) as err:
        raise _fail(str(err)) from None


SHOWN_CHARACTERS = 600  # of a passage `searchlab search` prints


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="the query")],
    k: Annotated[Optional[int], typer.Option("--k", "-k", help="hits to show (default: retriever.topk)")] = None,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the hits as JSON")] = False,
) -> None:
    """Print the top hits for a query from the built index (or from retriever.url); a long passage is cut at
    SHOWN_CHARACTERS (`--json` prints them whole)."""
    from searchlab.retrieval.base import RetrieverError

    if not query.strip():
        raise _fail("the query is empty: pass the words to search for, e.g. searchlab search 'Kroustrenholm'", 2)
    if k is not None and k < 1:
        raise _fail(f"-k {k}: the number of hits to show is at least 1", 2)
    root = find_root()
    params = _load(root, params_file, overrides)
    retriever = _open_retriever(root, params)
    try:
        hits = retriever.search([query], k or params.retriever.topk)[0]
    except (RetrieverError, ValueError) as err:  # a server down or refusing (k over its max_topk)
        raise _fail(str(err)) from None
    if as_json:
        print(json.dumps([{"id": h.id, "score": h.score, "contents": h.contents} for h in hits], ensure_ascii=False))
        return
    if not hits:
        console.print(f"no passage matches {query!r}", highlight=False)
    for rank, hit in enumerate(hits, start=1):
        heading, text = shown_hit(rank, hit)
        console.print(f"[bold]{escape(heading)}[/bold]", highlight=False)
        console.print(f"   {escape(text)}", highlight=False)


def shown_hit(rank: int, hit) -> tuple[str, str]:
    """How `searchlab search` prints a hit: ``(heading, text)``, the heading its rank, title, id and score, each
    cut at SHOWN_CHARACTERS."""
    title, _, text = hit.contents.partition("\n")
    if len(text) > SHOWN_CHARACTERS:
        text = f"{text[:SHOWN_CHARACTERS]}… ({len(text):,} characters; --json prints them all)"
    return f"{rank}. {title[:SHOWN_CHARACTERS]}  id={hit.id} score={hit.score:.3f}", text


def _model_path(root: Path, params: Params, model: str) -> str:
    """The model folder ``--model`` names: a model stage's output (``sft``), a folder, or ``models:/NAME@ALIAS``
    (the registry's folder)."""
    from tasks.sources import MODEL_STAGES, resolve

    folder = root / params.runtime.data_dir / model
    if model in MODEL_STAGES and not (folder / "manifest.json").is_file():
        raise _fail(f"no model at {folder}: run `searchlab run {model}` first, or pass another --model")
    try:
        return str(resolve(model, "--model", params, root))
    except ValueError as err:  # bad input (2), or a registry that refused it (1)
        raise _fail(str(err), code=1 if err.__cause__ is not None else 2) from None


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question")],
    model: Annotated[str, typer.Option(
        "--model",
        help="a model stage (sft, rl, selfplay: its output folder), a model folder, or models:/NAME@ALIAS")] = "sft",
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Run the search agent on one question and print its trajectory: thinking, searches with top hits, answer."""
    from searchlab.agent.budget import budget_words, fits
    from searchlab.agent.protocol import parse_trajectory
    from searchlab.agent.rollout import context_limit, rollout
    from searchlab.agent.text import agent_prompt, encode_prompt
    from searchlab.model import load_agent

    if not question.strip():
        raise _fail("the question is empty: pass the question to answer, e.g. searchlab ask 'Where was X born?'", 2)
    root = find_root()
    params = _load(root, params_file, overrides)
    path = _model_path(root, params, model)
    try:
        agent, tokenizer = load_agent(path, params.model, params.rollout)
    except (OSError, ValueError, RuntimeError) as err:
        raise _fail(str(err)) from None
    limit, prompt = context_limit(agent), len(encode_prompt(tokenizer, agent_prompt(tokenizer, question)))
    if not fits(prompt, params.rollout, limit):
        raise _fail(f"the question is too long for the model: its prompt is {prompt} tokens, and an episode may "
                    f"add {budget_words(params.rollout)}, over the model's {limit} positions", 2)
    with _open_retriever(root, params) as retriever:
        episode = rollout(agent, tokenizer, retriever, [question], params.rollout)[0]
    styles = {"think": "dim", "search": "bold cyan", "answer": "bold green", "feedback": "yellow", "text": "dim"}
    for segment in parse_trajectory(episode.completion).segments:
        body = segment.content.strip()
        if segment.kind == "information":
            for line in body.splitlines():
                console.print(f"    [blue]{line[:160]}[/blue]", highlight=False)
        elif body:
            console.print(f"[{styles.get(segment.kind, 'white')}]{segment.kind:>8}: {body}[/]", highlight=False)
    answer = episode.answer if episode.answer is not None else "(no answer: the episode was cut off)"
    console.print(f"\n[bold]answer:[/bold] {answer}   [dim]{len(episode.searches)} searches, {episode.turns} turns, "
                  f"{episode.generated_tokens} tokens, model {path}[/dim]", highlight=False)


def _wide_console() -> Console:
    """The console to print a wide table on: a pipe or a file gets the table's natural width, never wrapped cells."""
    return console if console.is_terminal else Console(width=100_000)


def _value(value: float | None) -> str:
    """A metric for a table: four significant digits (one decimal from 1000 up), a dash when the run lacks it."""
    if value is None:
        return "–"
    return f"{value:.1f}" if abs(value) >= 1000 else f"{value:.4g}"


@app.command()
def compare(
    runs: Annotated[list[str], typer.Argument(help="MLflow run ids: pipeline runs, or their evaluate stage runs")],
    metric: Annotated[Optional[str], typer.Option(
        "--metric", "-m", help="show only metrics whose name contains this text, e.g. /em or world-single")] = None,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Print the evaluation metrics of MLflow runs side by side: a row per metric, a column per run, with 95% CIs."""
    root = find_root()
    params = _load(root, params_file, overrides)
    from searchlab.eval.flat import with_intervals
    from tasks.tracking import TrackingError, evaluation_metrics

    columns, problems = [], []
    for run_id in runs:
        try:
            run, metrics = evaluation_metrics(params.tracking, root, run_id)
        except TrackingError as err:
            problems.append(str(err))
            continue
        columns.append((f"{run_id[:8]}\n{run.info.run_name or ''}", with_intervals(metrics)))
    for problem in problems:
        err_console.print(f"[red]error:[/red] {problem}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)
    names = sorted({name for _, rows in columns for name in rows if metric is None or metric in name})
    table = Table(title="evaluation metrics: mean [95% CI]")
    table.add_column("metric")
    for header, _ in columns:
        table.add_column(header, justify="right")
    for name in names:
        cells = []
        for _, rows in columns:
            value, low, high = rows.get(name, (None, None, None))
            interval = low is not None or high is not None
            cells.append(_value(value) + (f" [{_value(low)}, {_value(high)}]" if interval else ""))
        table.add_row(name, *cells)
    _wide_console().print(table)


@app.command("serve-retriever")
def serve_retriever(
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    host: Annotated[Optional[str], typer.Option(help="bind address (default: retriever.host, 127.0.0.1)")] = None,
    port: Annotated[Optional[int], typer.Option(help="port (default: retriever.port)")] = None,
) -> None:
    """Serve the built index over HTTP with Search-R1's POST /retrieve API (default topk: retriever.topk)."""
    _check_port(port, "--port")
    root = find_root()
    params = _load(root, params_file, overrides)
    from searchlab.retrieval.server import serve

    retriever = _open_retriever(root, params)
    rp = params.retriever
    host, port = host or rp.host, port or rp.port
    console.print(f"retriever ({rp.method}) on http://{host}:{port}/retrieve   health: http://{host}:{port}/health")
    serve(retriever, host=host, port=port, max_queries=rp.max_queries, max_topk=rp.max_topk, default_topk=rp.topk)


@app.command("eval-retrieval")
def eval_retrieval(
    beir_dir: Annotated[Optional[Path], typer.Argument(help="BEIR folder with queries.jsonl and qrels (default: the imported corpus)")] = None,
    k: Annotated[int, typer.Option("--k", help="depth of the ranking scored")] = 1000,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the metrics as JSON")] = False,
) -> None:
    """Score the built index on a BEIR collection's queries and qrels (trec_eval semantics)."""
    root = find_root()
    params = _load(root, params_file, overrides)
    from searchlab.retrieval.beir import eval_retrieval as evaluate

    folder = beir_dir or root / params.runtime.data_dir / "corpus"
    # the built index's own corpus file (a retriever.url serves an index this project cannot see)
    corpus = root / params.runtime.data_dir / "corpus/corpus.jsonl"
    indexed = corpus if params.retriever.url is None and corpus.is_file() else None
    retriever = _open_retriever(root, params)
    try:
        metrics = evaluate(retriever, folder, k=k, indexed_corpus=indexed)
    except (FileNotFoundError, ValueError) as err:
        raise _fail(str(err), 2) from None
    summary = {name: metrics[name] for name in ("ndcg_cut_10", "recall_100", "map")}
    if as_json:
        print(json.dumps(summary))
        return
    for name, value in summary.items():
        console.print(f"{name:<12} {value:.4f}")


@app.command()
def ui(
    prefect_port: Annotated[int, typer.Option(help="Prefect server port")] = 4200,
    mlflow_port: Annotated[int, typer.Option(help="MLflow UI port")] = 5000,
    host: Annotated[str, typer.Option(help="bind address; keep 127.0.0.1 unless you mean to expose them")] = "127.0.0.1",
) -> None:
    """Start the Prefect server and the MLflow UI for this project and print their URLs (Ctrl-C stops both)."""
    _check_port(prefect_port, "--prefect-port")
    _check_port(mlflow_port, "--mlflow-port")
    if prefect_port == mlflow_port:
        raise _fail(f"--prefect-port and --mlflow-port are both {prefect_port}: the two servers need a port each", 2)
    root = find_root()
    params = _load(root, DEFAULT_PARAMS, [])
    from flows.processes import start_bound, stop_all
    from flows.runtime import LOGS
    from tasks.tracking import tracking_uri

    env = dict(os.environ, PREFECT_HOME=str(root / ".prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_UI_API_URL=f"http://{host}:{prefect_port}/api")
    env.pop("PREFECT_API_URL", None)
    bin_dir = Path(sys.executable).parent
    logs = root / LOGS
    for port in (prefect_port, mlflow_port):
        # else the health checks below could be answered by whatever already listens there
        if not _port_free(host, port):
            raise _fail(f"port {port} on {host} is in use: pick another with --prefect-port / --mlflow-port", 2)
    # Each server is bound to this process: a kill -9 of `searchlab ui` takes them (and MLflow's workers) down too.
    servers = [start_bound([str(bin_dir / "prefect"), "server", "start", "--host", host, "--port", str(prefect_port)],
                           log=logs / "prefect.log", env=env, cwd=root)]
    try:
        servers.append(start_bound(
            [str(bin_dir / "mlflow"), "server", "--host", host, "--port", str(mlflow_port),
             "--backend-store-uri", tracking_uri(params.tracking, root),
             "--default-artifact-root", (root / "mlartifacts").resolve().as_uri()],
            # MLflow's background job runner (7 worker processes) serves GenAI features we don't use.
            log=logs / "mlflow.log", env=dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"), cwd=root))
        state = {"prefect_api_url": f"http://{host}:{prefect_port}/api",
                 "prefect_ui_url": f"http://{host}:{prefect_port}", "mlflow_url": f"http://{host}:{mlflow_port}",
                 # runs trust this record only while these processes live (flows.runtime.running_ui)
                 "pid": os.getpid(), "pids": [server.pid for server in servers]}
        with console.status("starting the Prefect server and the MLflow UI..."):
            _wait_for(state["prefect_api_url"] + "/health", servers[0], "Prefect server")
            _wait_for(state["mlflow_url"] + "/health", servers[1], "MLflow UI")
        (root / UI_STATE).parent.mkdir(exist_ok=True)
        (root / UI_STATE).write_text(json.dumps(state))
        console.print(f"Prefect UI: {state['prefect_ui_url']}\nMLflow UI:  {state['mlflow_url']}\n"
                      f"server logs: {logs}/prefect.log, mlflow.log\n"
                      "`searchlab run` in this project now reports to these servers. Ctrl-C stops both.",
                      highlight=False, soft_wrap=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while all(server.poll() is None for server in servers):
            time.sleep(1)
        stopped = next(server for server in servers if server.poll() is not None)
        raise _fail(f"a server stopped unexpectedly (exit status {stopped.returncode}); see {stopped.log}")
    except KeyboardInterrupt:
        pass
    finally:
        try:  # the record is ours to remove only if no other `searchlab ui` has replaced it
            if json.loads((root / UI_STATE).read_text()).get("pid") == os.getpid():
                (root / UI_STATE).unlink()
        except (OSError, ValueError):
            pass
        stop_all(servers)


def _port_free(host: str, port: int) -> bool:
    """Whether nothing listens on ``host:port`` (binding it succeeds)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no obstacle
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False


def _wait_for(url: str, server, what: str, timeout_s: float = 120) -> None:
    """Wait until ``url`` answers; fail naming ``what`` and its log if ``server`` exits first or time runs out."""
    from flows.runtime import wait_for_health

    if wait_for_health(url, server, timeout_s):
        return
    if server.poll() is not None:
        raise _fail(f"{what} exited with code {server.returncode} (is the port in use?); see {server.log}")
    raise _fail(f"{what} did not answer at {url} within {timeout_s:.0f} s; see {server.log}")


@app.command()
def serve(
    stages: Annotated[Optional[list[str]], typer.Argument(
        help="stages each run brings up to date by default (default: all)")] = None,
    cron: Annotated[Optional[str], typer.Option(help="also run on this schedule, e.g. '0 3 * * *'")] = None,
    name: Annotated[str, typer.Option(help="deployment name")] = "searchlab",
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Serve the pipeline as a Prefect deployment: start runs (other params, overrides) from the Prefect UI.

    Runs may not set endpoint URLs or secret-bearing keys (url, *_uri, *_env...) the served params do not hold.
    """
    _check_cron(cron)
    root = find_root()
    params = _load(root, params_file, overrides)
    _check_stages(stages)
    # A temporary server would go with this process, and the deployment and its schedule with it.
    api_url = _running_prefect(root, params, "serving")
    from flows.serving import SERVED, served_record

    # The runs this process executes inherit its environment; no run parameter can change what it says is served.
    os.environ[SERVED] = served_record(root, params_file, params)
    from flows.pipeline import pipeline

    console.print(f"deployment searchlab-pipeline/{name} on {api_url}"
                  + (f", scheduled '{cron}'" if cron else "") + ". Ctrl-C stops serving.", highlight=False)
    pipeline.serve(name=name, cron=cron,
                   parameters={"params_file": params_file, "overrides": overrides or [], "stages": stages or [],
                               "root": str(root)},
                   description="searchlab pipeline; set params_file, overrides, stages and force per run "
                               "(endpoint URLs and secret-bearing keys only as in the served params).")


def _check_stages(stages: list[str] | None) -> None:
    """Fail (exit code 2) naming a stage that does not exist, before anything starts."""
    from tasks.registry import BY_NAME

    unknown = [name for name in stages or [] if name not in BY_NAME]
    if unknown:
        raise _fail(f"unknown stage(s) {', '.join(unknown)}; stages are: {', '.join(BY_NAME)}", 2)


def _running_prefect(root: Path, params: Params, what: str) -> str:
    """The API URL of the Prefect server this project uses; fail saying ``what`` needs one when none runs."""
    api_url = configure_prefect(root, params.runtime.prefect_api_url, temporary=False)
    if api_url is None:
        raise _fail(f"{what} needs a running Prefect server: start `searchlab ui` first "
                    "(or set runtime.prefect_api_url / PREFECT_API_URL)")
    return api_url


def _process_pool(pool: str) -> bool:
    """Make sure work pool ``pool`` exists as a process pool (create it if missing); True if it was created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            found = client.read_work_pool(pool)
        except ObjectNotFound:
            try:
                client.create_work_pool(WorkPoolCreate(
                    name=pool, type=ProcessWorker.type,
                    base_job_template=ProcessWorker.get_default_base_job_template()))
                return True
            except ObjectAlreadyExists:  # another deploy or worker created it meanwhile
                found = client.read_work_pool(pool)
    if found.type != ProcessWorker.type:
        raise _fail(f"work pool {pool!r} is a {found.type!r} pool; searchlab runs in process pools: "
                    "name another --pool (it is created)", 2)
    return False


PoolOpt = Annotated[str, typer.Option("--pool", help="the Prefect work pool (a process pool; created if missing)")]


@app.command()
def deploy(
    pool: PoolOpt,
    stages: Annotated[Optional[list[str]], typer.Argument(
        help="stages each run brings up to date by default (default: all)")] = None,
    name: Annotated[str, typer.Option(help="deployment name")] = "searchlab",
    cron: Annotated[Optional[str], typer.Option(help="also run on this schedule, e.g. '0 3 * * *'")] = None,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Register the pipeline as a deployment in a Prefect work pool; `searchlab worker --pool` runs its runs.

    The given params, overrides and stages are the deployment's default parameters. Runs (from the UI, the
    schedule, the API) execute on whichever `searchlab worker` of the pool picks them up, which checks them
    against its own params: endpoint URLs and secret-bearing keys only as the worker's params hold them.
    """
    _check_cron(cron)
    root = find_root()
    params = _load(root, params_file, overrides)
    _check_stages(stages)
    api_url = _running_prefect(root, params, "deploying")
    import flows
    from flows.deployment import FILE_ENTRYPOINT, FLOW_NAME, deployed_pipeline

    created = _process_pool(pool)
    code = Path(flows.__file__).resolve().parents[1]  # the folder holding flows/: this project's code
    source = deployed_pipeline.from_source(source=str(code), entrypoint=FILE_ENTRYPOINT)
    # What `Flow.deploy` does for a flow from source without an image, less its count of the pool's workers (the
    # request it sends for that is refused by this Prefect server: 422, limit and offset null).
    source.to_deployment(
        name=name, cron=cron,
        parameters={"params_file": params_file, "overrides": overrides or [], "stages": stages or [], "force": []},
        description=f"searchlab pipeline, run by `searchlab worker --pool {pool}`; set params_file, overrides, "
                    "stages and force per run (endpoint URLs and secret-bearing keys only as in the worker's params).",
    ).apply(work_pool_name=pool)
    console.print(f"deployment {FLOW_NAME}/{name} in work pool {pool!r}" + (" (created)" if created else "")
                  + f" on {api_url}" + (f", scheduled '{cron}'" if cron else "") + ".\n"
                  f"Start runs from the Prefect UI or `prefect deployment run {FLOW_NAME}/{name}`; they wait for a "
                  f"worker: `searchlab worker --pool {pool}`.", markup=False, highlight=False, soft_wrap=True)


@app.command()
def worker(
    pool: PoolOpt,
    name: Annotated[Optional[str], typer.Option(
        help="worker name shown in the Prefect UI (default: generated)")] = None,
    limit: Annotated[int, typer.Option(help="most flow runs executed at once")] = 1,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Run the pool's pipeline runs on this machine, in this project (foreground; Ctrl-C stops it).

    --params / --set say which endpoint URLs and secret-bearing keys (url, *_uri, *_env...) runs may use, as
    `searchlab serve`'s do: a run that sets one that these params do not hold fails before any stage runs.
    """
    root = find_root()
    params = _load(root, params_file, overrides)
    if limit < 1:
        raise _fail("--limit must be at least 1", 2)
    api_url = _running_prefect(root, params, "a worker")
    from flows.serving import SERVED, served_record

    created = _process_pool(pool)
    # The runs this worker executes get this record (flows.worker), whatever the run or the deployment asks for.
    os.environ[SERVED] = served_record(root, params_file, params)
    import anyio

    from flows.worker import SearchlabWorker

    console.print(f"worker for work pool {pool!r}" + (" (created)" if created else "") + f" on {api_url}: runs "
                  f"execute in {root}, with the endpoints and secret-bearing keys of {params_file}"
                  + (f" {' '.join('--set ' + o for o in overrides)}" if overrides else "")
                  + ". Ctrl-C stops it.", markup=False, highlight=False, soft_wrap=True)
    pool_worker = SearchlabWorker(pool, root=root, served=os.environ[SERVED], name=name, limit=limit,
                                  create_pool_if_not_found=False)
    try:
        # Ctrl-C and SIGTERM stop it: it stops polling, and its running flow runs end with it (reported Crashed).
        anyio.run(pool_worker.run_until_stopped,
                  lambda *args, **_: console.print(*args, markup=False, highlight=False))
    except KeyboardInterrupt:  # Ctrl-C before it was polling
        pass
    console.print("worker stopped", highlight=False)


@app.command("dvc-yaml")
def dvc_yaml(
    check: Annotated[bool, typer.Option("--check", help="exit 1 if dvc.yaml is not current")] = False,
    params_file: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Write the dvc.yaml of a params file's data folder for its stage graph (one DVC stage per stage it needs:
    the project root's for data/, else inside the data folder; `searchlab run` writes it too, with params.yaml)."""
    root = find_root()
    params = _load(root, params_file, overrides)
    from tasks.dvc import pipeline_dir, render_dvc_yaml, write_effective_params

    text = render_dvc_yaml(params, root)
    path = root / pipeline_dir(params) / "dvc.yaml"
    shown = path.relative_to(root).as_posix()
    if check:
        if not path.exists() or path.read_text() != text:
            raise _fail(f"{shown} differs from the stage graph of {params_file}: run `searchlab dvc-yaml "
                        f"--params {params_file}`")
        console.print(f"{shown} is current")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    write_effective_params(root, params)  # what `dvc repro` reads beside it
    console.print(f"wrote {shown} and its params.yaml")


@app.command("params-doc")
def params_doc(
    check: Annotated[bool, typer.Option("--check", help="exit 1 if docs/params.md is not current or a params key "
                                                        "has no description")] = False,
) -> None:
    """Write docs/params.md from the params schema: a row per key with its default (and the demo profile's value)
    and its description in searchlab/params.py."""
    from searchlab.params_doc import COMMAND, DEMO_PROFILE, DOC_PATH, render_params_doc, undocumented_keys

    root = find_root()
    text = render_params_doc(_load(root, DEMO_PROFILE, None))
    path = root / DOC_PATH
    missing = undocumented_keys()
    problems = [f"params key(s) without a description in searchlab/params.py: {', '.join(missing)}; give each "
                f"field a Field(..., description=...)"] if missing else []
    if check:
        if not path.exists() or path.read_text() != text:
            problems.insert(0, f"{DOC_PATH} differs from what the params schema gives: run `{COMMAND}`")
        if problems:
            raise _fail("\n".join(problems))
        console.print(f"{DOC_PATH} is current")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    console.print(f"wrote {path}", highlight=False)
    if problems:
        raise _fail(problems[0])


def main() -> None:
    # The library reports progress notes (a resumed synthesis, skipped records) on the "searchlab" logger.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d | %(levelname)-7s | searchlab - %(message)s",
                                           "%H:%M:%S"))
    library = logging.getLogger("searchlab")
    library.addHandler(handler)
    library.setLevel(logging.INFO)
    library.propagate = False  # the root logger may print it too
    quiet_libraries()
    app()


if __name__ == "__main__":
    main()
