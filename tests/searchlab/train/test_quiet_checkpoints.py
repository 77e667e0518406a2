"""transformers' 'mtime may not be reliable' line, which checkpoints saved under a second apart trigger, is dropped;
every other line of that logger stays."""

from __future__ import annotations

import logging

from transformers.trainer_utils import sort_checkpoints
from transformers.utils import logging as hf_logging

from searchlab.train.common import FAST_CHECKPOINTS, FastCheckpointsFilter, ignore_fast_checkpoints


class _Kept(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _lines_of_rotation(folder, filtered: bool) -> list[str]:
    """What transformers logs while it orders two checkpoints saved a moment apart (as the Trainer's rotation does)."""
    log_of = logging.getLogger("transformers.trainer_utils")
    kept, before, level = _Kept(), list(log_of.filters), log_of.level
    log_of.addHandler(kept)
    # as the library leaves it, whatever an earlier test in this process set: warnings shown, no filter of ours
    log_of.setLevel(logging.WARNING)
    log_of.filters[:] = [f for f in before if not isinstance(f, FastCheckpointsFilter)]
    try:
        if filtered:
            ignore_fast_checkpoints()
        hf_logging.warning_once.cache_clear()  # warning_once logs a message once per process
        assert sort_checkpoints(str(folder), "checkpoint", use_mtime=True) == [str(folder / "checkpoint-1"),
                                                                               str(folder / "checkpoint-2")]
        log_of.warning("another line")
        return kept.messages
    finally:
        log_of.removeHandler(kept)
        log_of.filters[:] = before
        log_of.setLevel(level)


def test_checkpoints_saved_fast_no_longer_log_a_filesystem_alarm_and_the_filter_stays_only_while_needed(tmp_path):
    for step in (1, 2):
        (tmp_path / f"checkpoint-{step}").mkdir()
    unfiltered = _lines_of_rotation(tmp_path, filtered=False)
    assert any(FAST_CHECKPOINTS in line for line in unfiltered), (
        "transformers no longer logs its mtime line for checkpoints saved fast: remove ignore_fast_checkpoints from "
        "searchlab/train/common.py")
    assert _lines_of_rotation(tmp_path, filtered=True) == ["another line"]
