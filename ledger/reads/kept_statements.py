"""Statements kept per table state and request, so a repeated read skips making them.

A view's statement (its text and the files each relation reads) depends only on the state's
files (which never change, nor do the facts read from them), the request and the plan's size
thresholds: it is kept while that very state object lives, the least recently used dropped
beyond a bound (docs/views.md 9).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.log.state import TableState
    from ledger.snapshot import Snapshot

Params = dict[str, list[str]]


class KeptStatements:
    """At most ``size`` statements, each kept with a weak reference to the state it was made
    for: an id in a key can be reused once its state is gone, and the reference tells."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[Hashable, tuple[weakref.ref[TableState], str, Params]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, key: Hashable, snap: Snapshot) -> tuple[str, Params] | None:
        """The statement kept for ``key``, if it was made for this very state object."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0]() is not snap.state:
                return None
            self._kept.move_to_end(key)
        _, text, params = kept
        return text, _copied(params)

    def keep(self, key: Hashable, snap: Snapshot, text: str, params: Params) -> None:
        kept = (weakref.ref(snap.state), text, _copied(params))
        with self._lock:
            self._kept[key] = kept
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


def _copied(params: Params) -> Params:
    return {name: list(paths) for name, paths in params.items()}
