"""Progress bars on stderr for long operations (load, merge, vacuum, publish, refresh).

The operation gets a bar of its own that runs until it ends; steps the library reports
(:mod:`ledger.progress`) get bars with their counts beside it. Nothing is drawn when stderr is
not a terminal, so piped and scripted runs print results only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ledger.progress import reporting_to


@contextmanager
def activity(description: str) -> Iterator[None]:
    """Show ``description`` with a running bar while the block runs."""
    console = Console(stderr=True)
    bars = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not sys.stderr.isatty(),
    )

    @contextmanager
    def library_step(total: int, step: str, unit: str) -> Iterator[Callable[[int], None]]:
        task = bars.add_task(f"{step} ({unit})", total=total)

        def advance(n: int) -> None:
            bars.advance(task, n)

        try:
            yield advance
        finally:
            bars.remove_task(task)

    with bars, reporting_to(library_step):
        bars.add_task(description, total=None)
        yield
