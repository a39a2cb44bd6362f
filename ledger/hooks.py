"""Work that runs after a write to a table commits.

A module that builds on tables registers a hook here when it is imported (the rollup module
registers the refresh of auto-refreshed rollups); a write that committed runs every hook with
its table. The modules underneath (transactions, partition changes) thus never import what
builds on them.

A hook runs after the commit landed: it must not raise for what it could not do (the write is
committed either way), only log it.

>>> @after_commit                                                  # doctest: +SKIP
... def announce(table):
...     log.info("%s is at version %d", table.name, table.version)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.table import Table

AfterCommit = Callable[["Table"], None]

_after_commit: list[AfterCommit] = []


def after_commit(hook: AfterCommit) -> AfterCommit:
    """Register ``hook`` to run after every committed write (once, however often registered);
    returns it, so it can decorate the function."""
    if hook not in _after_commit:
        _after_commit.append(hook)
    return hook


def run_after_commit(table: Table) -> None:
    """Run the registered hooks for ``table``, whose write just committed."""
    for hook in tuple(_after_commit):
        hook(table)
