"""The table handle: one table's store, log and cached state, and the way to commit to it.

Everything that reads or commits a table's log (transactions, merges, partition changes,
vacuum, rollups, change sets, insert transforms, the buffered writer and the engines) goes
through a :class:`TableHandle`, reachable as ``table.handle``. It caches the latest state it
has seen, refreshes it incrementally from the log, and adopts the state each commit produces.

>>> handle = wh.table("accounts").handle                          # doctest: +SKIP
>>> handle.latest_state().version                                 # doctest: +SKIP
7
>>> handle.commit(build)                                          # doctest: +SKIP
"""

from __future__ import annotations

import threading

from ledger.errors import TableDroppedError
from ledger.log.commit import BuildEntry, ConflictCheck, commit_entry, no_conflicts
from ledger.log.entries import LogFile
from ledger.log.state import TableState
from ledger.log.table_log import TableLog
from ledger.storage import Store


class TableHandle:
    """The store, log and cached state of the table stored under ``<name>/`` in ``store``.

    Thread-safe: the cached state only moves forward, whichever thread adopts a state.
    """

    def __init__(self, store: Store, name: str, state: TableState) -> None:
        self.store = store
        self.name = name
        self.prefix = f"{name}/"
        self.log = TableLog(store, self.prefix, name)
        # A table dropped and created again under the same name is another table: its uuid
        # tells the two apart.
        self.table_uuid = state.config.table_uuid
        self._state = state
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TableHandle({self.name!r}, version={self.state.version})"

    @property
    def state(self) -> TableState:
        """The latest state this handle has seen, without reading the log."""
        with self._lock:
            return self._state

    def latest_state(self) -> TableState:
        """The latest state: reads only the commits made since :attr:`state`. Raises
        :class:`~ledger.errors.TableDroppedError` when the table was dropped since the handle
        opened it."""
        fresh = self.log.refresh(self.state)
        if fresh.dropped or fresh.config.table_uuid != self.table_uuid:
            raise TableDroppedError(
                f"table {self.name!r} was dropped (version {fresh.version}) after this handle "
                "opened it; open it again with warehouse.table(name)"
            )
        self.adopt(fresh)
        return fresh

    def adopt(self, state: TableState) -> None:
        """Cache ``state`` if it is newer than the cached one (e.g. what a commit produced)."""
        with self._lock:
            if state.version > self._state.version:
                self._state = state

    def commit(
        self,
        build: BuildEntry,
        base: TableState | None = None,
        check: ConflictCheck = no_conflicts,
    ) -> tuple[TableState, LogFile | None]:
        """Commit what ``build`` makes on top of the latest state (see
        :func:`ledger.log.commit.commit_entry`), starting from ``base`` (default: the latest
        state read now), and adopt the state it produced. Returns that state and the entry
        committed (None when ``build`` had nothing to commit)."""
        state, entry = commit_entry(
            self.log, self.latest_state() if base is None else base, build, check
        )
        self.adopt(state)
        return state, entry
