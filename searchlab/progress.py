"""Progress display for long work: a bar with count, rate and ETA on stderr.

Library code wraps its long loops in :func:`track`; the bar hides itself when
stderr is not a terminal unless ``force`` is set, so logs stay readable.
"""

from __future__ import annotations

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
