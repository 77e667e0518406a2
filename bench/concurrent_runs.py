"""Check: concurrent runs with different params on one repo compute each (stage, fingerprint) once, register one
model version per distinct sft output, and every evaluation scores the questions of its own params.

    python bench/concurrent_runs.py [--seeds 6 6 7]

Starts one `searchlab run --params params/smoke.yaml --set qa.seed=S` per seed at once in a throwaway project,
then reads MLflow: how many stage runs computed each (stage, fingerprint), and the versions of searchlab-agent.
Then, for each distinct seed, runs it again alone and checks that the questions in data/evaluate's predictions
are those of data/benchmarks (a cached evaluate that scored another seed's questions would fail this).

Output: stdout only: one line per run, per stage (how many times each fingerprint was computed) and per
seed run again alone, then ``summary: OK|FAILED``. The throwaway project (a temporary folder) is
deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHLAB = str(Path(sys.executable).parent / "searchlab")


def run(project: Path, seed: int, env: dict) -> subprocess.Popen:
    return subprocess.Popen([SEARCHLAB, "run", "--params", "params/smoke.yaml", "--set", f"qa.seed={seed}"],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def questions(path: Path) -> set[str]:
    return {json.loads(line)["question"] for file in sorted(path.rglob("*.jsonl"))
            for line in file.read_text().splitlines() if line.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[6, 6, 7])
    args = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="searchlab-concurrent-"))
    shutil.copytree(ROOT / "params", project / "params")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    # corpus and index do not depend on the seed: build them first, so the runs race on qa and below
    subprocess.run([SEARCHLAB, "run", "index", "--params", "params/smoke.yaml"], cwd=project, env=env, check=True,
                   capture_output=True)
    started = time.time()
    procs = [run(project, seed, env) for seed in args.seeds]
    for seed, proc in zip(args.seeds, procs):
        out = proc.communicate()[0]
        print(f"run qa.seed={seed}: exit {proc.returncode}" + ("" if proc.returncode == 0 else f"\n{out[-2000:]}"))
    print(f"{len(procs)} concurrent runs took {time.time() - started:.0f} s")

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    computed = collections.Counter(
        (r.data.tags["searchlab.stage"], r.data.tags["searchlab.fingerprint"][:12])
        for r in client.search_runs(experiments, "tags.`searchlab.cached` = 'false'", max_results=1000)
        if r.info.status == "FINISHED")
    by_stage = collections.defaultdict(list)
    for (stage, _), count in computed.items():
        by_stage[stage].append(count)
    for stage, counts in by_stage.items():
        print(f"{stage:<10} computed for {len(counts)} fingerprint(s), times each: {counts}")
    versions = client.search_model_versions("name = 'searchlab-agent'")
    fingerprints = {v.tags.get("searchlab.fingerprint") for v in versions}
    print(f"searchlab-agent versions: {len(versions)} for {len(fingerprints)} distinct sft fingerprint(s)")
    ok = all(count == 1 for count in computed.values()) and len(versions) == len(fingerprints)
    for seed in sorted(set(args.seeds)):
        proc = subprocess.run([SEARCHLAB, "run", "--params", "params/smoke.yaml", "--set", f"qa.seed={seed}"],
                              cwd=project, env=env, capture_output=True, text=True)
        asked, suite = questions(project / "data/evaluate/predictions"), questions(project / "data/benchmarks")
        match = proc.returncode == 0 and asked <= suite
        ok &= match
        print(f"qa.seed={seed} alone: evaluate scored {len(asked)} questions, "
              f"{'all' if match else 'NOT all'} from this seed's benchmarks")
    print(f"summary: {'OK' if ok else 'FAILED'} ({project})")
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
