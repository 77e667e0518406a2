"""Check: `kill -9` of `searchlab run` in the middle of RL, then a rerun, ends with the weights of an
uninterrupted run (smoke profile, longer RL, one torch thread).

    python bench/rl_resume.py [--steps 12] [--kill-after 6]

Two throwaway projects run `searchlab run rl` with the same params: A straight through; B is killed (SIGKILL
to the whole process group) once its checkpoint of step ``--kill-after`` is complete, then run again. Prints the
step B resumed from (its manifest's ``resumed_from_step``), and the largest absolute difference between A's and
B's weights, and between either and the sft policy they started from (so a zero difference means something).
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


def run(project: Path, overrides: list[str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    args = [str(BIN / "searchlab"), "run", "rl", "--params", "params/smoke.yaml", "--no-dvc-commit"]
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--kill-after", type=int, default=6)
    args = parser.parse_args()
    overrides = [f"rl.steps={args.steps}", "rl.save_steps=2", "rl.threads=1", "rl.samples=0"]
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        for project in (a, b):
            shutil.copytree(ROOT / "params", project / "params")
        if run(a, overrides).wait() != 0:
            sys.exit("the uninterrupted run failed")
        proc = run(b, overrides)
        deadline = time.time() + 900
        while not list((b / "data/.work/rl").glob(f"*/checkpoints/checkpoint-{args.kill_after}/trainer_state.json")):
            if proc.poll() is not None or time.time() > deadline:
                sys.exit(f"run B ended (exit {proc.returncode}) before checkpoint {args.kill_after}")
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = sorted(int(p.name.split("-")[1]) for p in (b / "data/.work/rl").glob("*/checkpoints/checkpoint-*"))
        if run(b, overrides).wait() != 0:
            sys.exit("the rerun of B failed")
        resumed = json.loads((b / "data/rl/manifest.json").read_text())["counts"]["resumed_from_step"]
        wa, wb, start = weights(a / "data/rl"), weights(b / "data/rl"), weights(a / "data/sft")
        print(f"killed with checkpoints {killed_at}; the rerun resumed from step {resumed}")
        print(f"largest |A - B| weight difference: {largest_difference(wa, wb):.3g}; "
              f"largest |A - sft| (what RL changed): {largest_difference(wa, start):.3g}")


if __name__ == "__main__":
    main()
