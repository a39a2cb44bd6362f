"""Progress of long operations: a progress bar on a terminal, log lines otherwise.

A front end (the ``ledger`` command) can take the reports over with :func:`reporting_to`, so
the library's steps show on its own bars.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

log = logging.getLogger("ledger")

# (total, description, unit) -> a context yielding advance(n)
Reporter = Callable[[int, str, str], AbstractContextManager[Callable[[int], None]]]
_reporter: ContextVar[Reporter | None] = ContextVar("ledger_progress_reporter", default=None)


@contextmanager
def reporting_to(reporter: Reporter) -> Iterator[None]:
    """Send every progress report made inside the block to ``reporter`` instead of tqdm."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


@contextmanager
def progress(
    total: int, description: str, unit: str, enabled: bool | None = None
) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``. ``enabled=None`` shows a bar only when stderr is a terminal; other
    runs (jobs, CI) get one log line per step at INFO level instead."""
    reporter = _reporter.get()
    if reporter is not None and enabled is not False:
        with reporter(total, description, unit) as report:
            yield report
        return
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
