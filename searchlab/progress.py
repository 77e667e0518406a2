"""Progress display for long work: a bar with count, rate and ETA on stderr.

Library code wraps its long loops in :func:`track`; the bar hides itself when
stderr is not a terminal unless ``force`` is set, so logs stay readable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def track(items: Iterable[T], total: int | None = None, desc: str = "", unit: str = "it") -> Iterator[T]:
    """Yield ``items`` while showing a progress bar (count, rate, ETA) on stderr."""
    yield from tqdm(
        items,
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=True,
        file=sys.stderr,
        disable=None,  # None: shown on a terminal, silent in pipes and CI logs
        mininterval=0.5,
        dynamic_ncols=True,
    )


def counter(total: int | None = None, desc: str = "", unit: str = "it") -> tqdm:
    """A progress bar to ``update(n)`` by hand, for work that is not a simple loop."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr, disable=None,
                mininterval=0.5, dynamic_ncols=True)


def quiet_libraries() -> None:
    """Turn off the progress bars datasets and transformers draw for every call ("Truncating train dataset",
    "Loading weights", "Writing model shards"): dozens per stage, each saying less than the stage's own lines.

    Set through their environment switches, which training workers inherit and which cost nothing before the
    libraries are imported (the CLI's start); where one already is imported, through its own switch.
    """
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' bars follow huggingface_hub's
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
