"""How :func:`searchlab.train.launch.launch` starts its workers: one directly, several through ``accelerate launch``."""

from __future__ import annotations

import sys

from searchlab.train.launch import distributed_options, one_worker

ONE_PROCESS = ["--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--num_cpu_threads_per_process", "2"]


def test_a_single_worker_is_started_directly_with_the_environment_accelerate_gives_it():
    command, env = one_worker(ONE_PROCESS + ["-m", "searchlab.train.sft_worker", "job.json"])
    assert command == [sys.executable, "-m", "searchlab.train.sft_worker", "job.json"]
    assert env["OMP_NUM_THREADS"] == "2" and env["ACCELERATE_MIXED_PRECISION"] == "no"


def test_several_workers_are_left_to_accelerates_launcher():
    two = ["--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--num_cpu_threads_per_process", "1", *distributed_options()]
    assert one_worker(two + ["-m", "searchlab.train.sft_worker", "job.json"]) is None
