"""Progress of long operations: a progress bar on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("ledger")


@contextmanager
def progress(
    total: int, description: str, unit: str, enabled: bool | None = None
) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``. ``enabled=None`` shows a bar only when stderr is a terminal; other
    runs (jobs, CI) get one log line per step at INFO level instead."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if enabled:
        from tqdm import tqdm

        with tqdm(total=total, desc=description, unit=unit, unit_scale=True) as bar:
            yield bar.update
        return
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        log.info("%s: %d/%d %s", description, done, total, unit)

    yield advance
