"""Check: `kill -9` of `searchlab run` in the middle of RL or of self-play, then a rerun, ends with the weights of
an uninterrupted run (smoke profile, longer training, one torch thread).

    python bench/rl_resume.py [--steps 12] [--kill-after 6]
    python bench/rl_resume.py --stage selfplay [--steps 6] [--kill-after 3] [--set selfplay.proposals_per_round=4]

Two throwaway projects run `searchlab run STAGE` with the same params: A straight through; B is killed (SIGKILL
to the whole process group), then run again. ``rl``: killed once its checkpoint of step ``--kill-after`` is
complete. ``selfplay``: killed mid-round, as soon as round ``--kill-after`` (counted from 0) has written its
proposals and before its update is checkpointed. Prints the step B resumed from (its manifest's
``resumed_from_step``: the rounds it had finished), and the largest absolute difference between A's and B's
weights, and between either and the sft policy they started from (so a zero difference means something).

Output: stdout only: the checkpoints B was killed with and the step it resumed from, the largest weight
differences (and, for selfplay, whether A's and B's questions.jsonl are identical); both projects are
temporary folders, deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(project: Path, stage: str, overrides: list[str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    args = [str(BIN / "searchlab"), "run", stage, "--params", "params/smoke.yaml", "--no-dvc-commit"]
    for override in overrides:
        args += ["--set", override]
    return subprocess.Popen(args, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def largest_difference(a: dict, b: dict) -> float:
    return max(float((a[name] - b[name]).abs().max()) for name in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=["rl", "selfplay"], default="rl")
    parser.add_argument("--steps", type=int, default=12, help="rl steps or selfplay rounds")
    parser.add_argument("--kill-after", type=int, default=6)
    parser.add_argument("--set", action="append", default=[], help="more params overrides")
    args = parser.parse_args()
    stage = args.stage
    if stage == "rl":
        overrides = [f"rl.steps={args.steps}", "rl.save_steps=2", "rl.threads=1", "rl.samples=0"]
        marker = f"*/checkpoints/checkpoint-{args.kill_after}/trainer_state.json"
    else:
        overrides = [f"selfplay.rounds={args.steps}", "selfplay.threads=1", "selfplay.samples=0"]
        marker = f"*/rounds/round-{args.kill_after:04d}.jsonl"
    overrides += args.set
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        for project in (a, b):
            shutil.copytree(ROOT / "params", project / "params")
        if run(a, stage, overrides).wait() != 0:
            sys.exit("the uninterrupted run failed")
        proc = run(b, stage, overrides)
        work = b / "data/.work" / stage
        deadline = time.time() + 1800
        while not list(work.glob(marker)):
            if proc.poll() is not None or time.time() > deadline:
                sys.exit(f"run B ended (exit {proc.returncode}) before {marker}")
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = sorted(int(p.name.split("-")[1]) for p in work.glob("*/checkpoints/checkpoint-*")
                           if (p / "trainer_state.json").is_file())
        if run(b, stage, overrides).wait() != 0:
            sys.exit("the rerun of B failed")
        resumed = json.loads((b / f"data/{stage}/manifest.json").read_text())["counts"]["resumed_from_step"]
        wa, wb, start = weights(a / f"data/{stage}"), weights(b / f"data/{stage}"), weights(a / "data/sft")
        print(f"killed with checkpoints {killed_at}; the rerun resumed from step {resumed}")
        print(f"largest |A - B| weight difference: {largest_difference(wa, wb):.3g}; "
              f"largest |A - sft| (what {stage} changed): {largest_difference(wa, start):.3g}")
        if stage == "selfplay":
            questions = [project / "data/selfplay/questions.jsonl" for project in (a, b)]
            same = questions[0].read_bytes() == questions[1].read_bytes()
            print(f"questions.jsonl of A and B identical: {same}")


if __name__ == "__main__":
    main()
