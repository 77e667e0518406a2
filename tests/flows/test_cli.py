"""The `searchlab` command line, run as a user would, against a real Prefect server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.conftest import BIN, make_project, processes_running, run_cli

FLASHRAG_LINE = '{"id": "q1", "question": "Who?", "golden_answers": ["Ann"]}\n'


@pytest.mark.parametrize("args, message", [
    (["run", "--force", "nosuch"], "--force nosuch: no such stage; stages are: corpus, index, qa, benchmarks, base, sft"),
    (["run", "corpus", "--force", "sft"], "--force sft: not among the stages of this run (corpus)"),
    (["run", "sft", "--force", "evaluate"],
     "--force evaluate: not among the stages of this run (corpus, index, qa, base, sft); name it as a stage to run too"),
    (["run", "--set", "nosuch.key=1"], "error: invalid params:\n  nosuch (from --set nosuch.key=1): unknown key"),
    (["run", "--set", "retriever.max_topk=2"], "retriever (line 13, --set retriever.max_topk=2): retriever.topk (3) "
                                               "is over retriever.max_topk (2)"),
    (["serve-retriever", "--set", "retriever.max_topk=2"], "retriever.topk (3) is over retriever.max_topk (2)"),
    (["run", "--set", "model.tiny.kv_heads=3"], "model.tiny (line 23, --set model.tiny.kv_heads=3): model.tiny.heads 2 "
                                                "is not divisible by model.tiny.kv_heads 3"),
    (["run", "--set", "eval.suites=[world-singel]"], "--set eval.suites=[world-singel]"),  # brackets are not markup
    (["run", "--set", "eval.benchmarks.mine.path=mine.jsonl"],
     "eval.benchmarks.mine: {project}/mine.jsonl: line 2: key 'golden_answers' is missing"),
    (["status", "--set", "eval.benchmarks.mine.path=latin1.jsonl"],
     "eval.benchmarks.mine: {project}/latin1.jsonl: line 2: not UTF-8 text: bytes b'\\xe9' at byte 33 of the line"),
    (["ask", "  "], "error: the question is empty"),
    (["search", ""], "error: the query is empty"),
    (["search", "Ann", "-k", "0"], "error: -k 0: the number of hits to show is at least 1"),
    (["search", "Ann", "-k", "-3"], "error: -k -3: the number of hits to show is at least 1"),
    (["serve-retriever", "--port", "99999"], "error: --port 99999: a port is a number from 1 to 65535"),
    (["serve", "--cron", "not a cron"], "error: --cron 'not a cron': not a cron schedule"),
    (["deploy", "--pool", "nightly", "--cron", "61 * * * *"], "error: --cron '61 * * * *': not a cron schedule"),
])
def test_input_problems_exit_2_naming_the_key_before_anything_runs(tmp_path, args, message):
    """Each fails in the CLI itself, before Prefect starts: no data, no Prefect or MLflow state left behind."""
    project = make_project(tmp_path / "project")
    (project / "mine.jsonl").write_text(FLASHRAG_LINE + '{"id": "q2", "question": "What?"}\n')
    latin1 = FLASHRAG_LINE + '{"id": "q2", "question": "Beyonc\xe9?"}\n'
    (project / "latin1.jsonl").write_bytes(latin1.encode("latin-1"))
    bad = run_cli(project, *args, "--params", "params/smoke.yaml", check=False, timeout=60)
    assert bad.returncode == 2, bad.stderr
    assert message.format(project=project) in bad.stderr
    assert "Traceback" not in bad.stderr
    assert sorted(p.name for p in project.iterdir()) == ["latin1.jsonl", "mine.jsonl", "params"]


@pytest.mark.parametrize("args, message", [
    (["--prefect-port", "70000"], "error: --prefect-port 70000: a port is a number from 1 to 65535"),
    (["--mlflow-port", "0"], "error: --mlflow-port 0: a port is a number from 1 to 65535"),
    (["--prefect-port", "4311", "--mlflow-port", "4311"],
     "error: --prefect-port and --mlflow-port are both 4311: the two servers need a port each"),
])
def test_ui_refuses_ports_it_cannot_use_at_once(tmp_path, args, message):
    project = make_project(tmp_path / "project")
    started = time.monotonic()
    bad = run_cli(project, "ui", *args, check=False, timeout=60)
    assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr
    assert time.monotonic() - started < 30  # refused, not waited on
    assert not (project / ".prefect").exists()


def test_a_huge_passage_is_shown_cut_with_its_length():
    from flows.cli import SHOWN_CHARACTERS, shown_hit
    from searchlab.retrieval.base import Hit

    heading, text = shown_hit(1, Hit("p1", '"Vast"\n' + "word " * 1_000_000, 2.5))
    assert heading == '1. "Vast"  id=p1 score=2.500'
    assert len(text) < SHOWN_CHARACTERS + 80 and text.endswith("… (5,000,000 characters; --json prints them all)")
    assert shown_hit(2, Hit("p2", '"Small"\nA town.', 1.0)) == ('2. "Small"  id=p2 score=1.000', "A town.")


def test_a_search_against_a_retriever_that_is_down_is_one_line(tmp_path):
    project = make_project(tmp_path / "project")
    down = run_cli(project, "search", "Ann", "--params", "params/smoke.yaml", "--set",
                   "retriever.url=http://127.0.0.1:9", check=False, timeout=60)
    assert down.returncode == 1 and "Traceback" not in down.stderr
    [line] = [line for line in down.stderr.splitlines() if line.strip()]
    assert line.startswith("error: cannot reach the retrieval server at http://127.0.0.1:9/retrieve")


@pytest.mark.slow
def test_run_status_search_and_param_errors(prefect_server, tmp_path):
    project = make_project(tmp_path / "project")
    bad = run_cli(project, "run", "--params", "params/smoke.yaml", "--set", "index.thread=2", check=False)
    assert bad.returncode == 2
    assert "index.thread (from --set index.thread=2): unknown key" in bad.stderr
    assert not (project / "data").exists()  # nothing ran

    missing = run_cli(project, "status", "--params", "params/smoke.yaml")
    assert "corpus       missing" in missing.stdout and "index        missing" in missing.stdout

    first = run_cli(project, "run", "--params", "params/smoke.yaml")
    assert "computed" in first.stdout and "data:" in first.stdout and "peak RSS" in first.stdout
    # the run ends with the evaluation's results: eval.sample is 2 questions, or all of a smaller suite
    singles = min(2, len((project / "data/benchmarks/world-single.jsonl").read_text().splitlines()))
    assert f"| world-single | sft/agent | {singles} |" in first.stdout

    cached = run_cli(project, "status", "--params", "params/smoke.yaml")
    assert "corpus       cached" in cached.stdout and "index        cached" in cached.stdout
    assert "built in" in cached.stdout and "peak RSS" in cached.stdout  # each build's time and memory

    stale = run_cli(project, "status", "--params", "params/smoke.yaml", "--set", "corpus.world.seed=5")
    assert "corpus       stale" in stale.stdout
    assert "param corpus.world.seed: 0 -> 5" in stale.stdout
    assert "upstream corpus changed" in stale.stdout

    # search the built index for a passage's own title: that passage comes back first
    first_passage = json.loads((project / "data/corpus/corpus.jsonl").read_text().splitlines()[0])
    title = first_passage["contents"].split("\n")[0].strip('"')
    hits = json.loads(run_cli(project, "search", title, "--params", "params/smoke.yaml", "--json", "-k", "3").stdout)
    assert len(hits) == 3
    assert title in hits[0]["contents"].split("\n")[0]
    shown = run_cli(project, "search", title, "--params", "params/smoke.yaml", "-k", "1").stdout
    assert shown.startswith(f"1. {hits[0]['contents'].split(chr(10))[0]}")
    nothing = run_cli(project, "search", "zzqxjv", "--params", "params/smoke.yaml").stdout
    assert nothing.strip() == "no passage matches 'zzqxjv'"

    # the trained agent answers through the built index; the registry alias names the same folder
    question = json.loads((project / "data/benchmarks/world-single.jsonl").read_text().splitlines()[0])["question"]
    asked = run_cli(project, "ask", question, "--params", "params/smoke.yaml")
    assert "answer:" in asked.stdout and str(project / "data/sft") in asked.stdout.replace("\n", "")
    by_alias = run_cli(project, "ask", question, "--params", "params/smoke.yaml", "--model", "models:/searchlab-agent@sft")
    assert by_alias.stdout.split("answer:")[1].split()[0] == asked.stdout.split("answer:")[1].split()[0]
    unknown = run_cli(project, "ask", question, "--params", "params/smoke.yaml", "--model", "models:/nope@sft",
                      check=False)
    assert unknown.returncode == 1 and "nope" in unknown.stderr
    too_long = run_cli(project, "ask", "Where was he born? " * 400, "--params", "params/smoke.yaml", check=False)
    assert too_long.returncode == 2 and "error: the question is too long for the model" in too_long.stderr

    # a second run (every stage cached) still prints the results; then the two runs' metrics side by side
    again = run_cli(project, "run", "--params", "params/smoke.yaml")
    assert "computed" not in again.stdout and f"| world-single | sft/agent | {singles} |" in again.stdout
    _compare_two_runs(project)


def _compare_two_runs(project):
    """`searchlab compare` of the first pipeline run and the second run's evaluate stage run, and its errors."""
    from mlflow import MlflowClient

    from tasks.tracking import default_tracking_uri

    client = MlflowClient(default_tracking_uri(project))
    experiment = client.get_experiment_by_name("searchlab-smoke").experiment_id
    evaluations = client.search_runs([experiment], "tags.`searchlab.stage` = 'evaluate'",
                                     order_by=["attributes.start_time ASC"])
    first_pipeline = evaluations[0].data.tags["mlflow.parentRunId"]
    second_evaluation = evaluations[1].info.run_id
    shown = run_cli(project, "compare", first_pipeline, second_evaluation, "--params", "params/smoke.yaml").stdout
    assert first_pipeline[:8] in shown and second_evaluation[:8] in shown
    em = next(line for line in shown.splitlines() if "eval/world-single/sft-agent/em " in line)
    assert em.count("[") == 2  # the mean with its 95% interval, for each run
    assert "throughput/sft-agent/questions_per_s" in shown
    sft = client.search_runs([experiment], "tags.`searchlab.stage` = 'sft'")[0].info.run_id
    bad = run_cli(project, "compare", first_pipeline, "0" * 32, sft, "--params", "params/smoke.yaml", check=False)
    assert bad.returncode == 1 and f"run {'0' * 32}: no such run" in bad.stderr
    assert f"run {sft}: no eval metrics (the sft stage's run" in bad.stderr


@pytest.mark.slow
def test_kill_9_during_index_then_rerun_completes(prefect_server, tmp_path):
    project = make_project(tmp_path / "project")
    run_cli(project, "run", "corpus", "--params", "params/smoke.yaml")
    proc = subprocess.Popen([str(BIN / "searchlab"), "run", "--params", "params/smoke.yaml"], cwd=project,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=os.environ.copy())
    deadline = time.time() + 120
    while not list((project / "data/.work/index").glob("tmp-*")):
        assert proc.poll() is None and time.time() < deadline, "index stage never started"
        time.sleep(0.05)
    assert not (project / "data/index").exists()
    os.killpg(proc.pid, signal.SIGKILL)  # the run and the indexer it started
    proc.wait()
    assert not (project / "data/index").exists()
    rerun = run_cli(project, "run", "--params", "params/smoke.yaml")
    assert "index" in rerun.stdout and (project / "data/index/manifest.json").exists()
    assert "index        cached" in run_cli(project, "status", "--params", "params/smoke.yaml").stdout


# Ctrl-C in a terminal sends SIGINT to the process group; `timeout`, `docker stop` and CI cancellation send SIGTERM
# to the process alone
STOPS = {"ctrl-c": (signal.SIGINT, True, 130, "error: interrupted (Ctrl-C)"),
         "sigterm": (signal.SIGTERM, False, 143, "error: terminated (SIGTERM)")}


@pytest.mark.slow
@pytest.mark.parametrize("stop", STOPS)
def test_ctrl_c_or_sigterm_during_training_ends_the_run_as_interrupted(prefect_server, tmp_path, stop):
    """SIGINT to the run's process group, or SIGTERM to the run alone, while sft trains: the run says how it was
    stopped (exit 130, 143) rather than naming a casualty of the signal, its MLflow runs end KILLED, no process is
    left (the training worker ends with the run that launched it), and the same command then finishes the stage."""
    signum, to_group, status, message = STOPS[stop]
    from mlflow import MlflowClient

    from tasks.tracking import default_tracking_uri

    project = make_project(tmp_path / "project")
    run_cli(project, "run", "base", "--params", "params/smoke.yaml")
    # default SIGINT handling in the run, whatever the test runner's (a background shell's children ignore it)
    proc = subprocess.Popen([str(BIN / "searchlab"), "run", "sft", "--params", "params/smoke.yaml"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), env=os.environ.copy())
    output = []
    for line in proc.stdout:  # the run's progress lines, until sft's first step
        output.append(line)
        if "sft: step" in line:
            break
    assert proc.poll() is None, "".join(output)
    os.killpg(proc.pid, signum) if to_group else os.kill(proc.pid, signum)
    output += proc.stdout.readlines()
    assert proc.wait(timeout=60) == status, "".join(output)
    text = "".join(output)
    assert message in text and "TrackingError" not in text, text
    deadline = time.time() + 10
    while left := processes_running(str(project)):  # the training worker, the MLflow worker (its own session)
        assert time.time() < deadline, f"processes of the interrupted run still alive: {left}"
        time.sleep(0.1)

    client = MlflowClient(default_tracking_uri(project))
    experiment = client.get_experiment_by_name("searchlab-smoke").experiment_id
    interrupted = client.search_runs([experiment], "tags.`searchlab.stage` = 'sft'")
    assert [run.info.status for run in interrupted] == ["KILLED"]
    parent = client.get_run(interrupted[0].data.tags["mlflow.parentRunId"])
    assert parent.info.status == "KILLED"
    assert not (project / "data/sft").exists()
    rerun = run_cli(project, "run", "sft", "--params", "params/smoke.yaml")
    assert (project / "data/sft/manifest.json").is_file(), rerun.stdout
