"""A worker that fails as safetensors does on a full disk: ``python -m tests.searchlab.train.full_disk_job JOB``."""

import sys
from pathlib import Path

from searchlab.train.launch import Job, run_job


class FullDiskJob(Job):
    work_dir: Path


def main(job: FullDiskJob) -> None:
    raise RuntimeError(f"Error while serializing: IoError(Os {{ code: 28, kind: StorageFull, message: \"No space "
                       f"left on device\" }}) writing {job.work_dir}/model.safetensors")


if __name__ == "__main__":
    run_job(main, sys.argv[1], FullDiskJob)
