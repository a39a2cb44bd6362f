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
import time

from ledger.errors import TableDroppedError
from ledger.log.commit import BuildEntry, ConflictCheck, commit_entry, no_conflicts
from ledger.log.entries import LogFile
from ledger.log.state import TableState
from ledger.log.table_log import TableLog
from ledger.storage import Store

# A blind commit may start from a held state, without listing the log, while that state was
# confirmed the latest less than this fraction of the table's transaction timeout ago: vacuum
# deletes no log file after a version until a checkpoint beyond it is older than the timeout
# (plus the clock-skew margin), so the versions after such a state cannot be free again. The
# other half is the margin for clocks and a slow request (docs/format.md 6.1).
HELD_STATE_FRACTION = 0.5


_BOOT_CLOCK = getattr(time, "CLOCK_BOOTTIME", None)


def clock() -> float:
    """Seconds on a clock that only moves forward and keeps counting while the machine sleeps
    (Linux's boot time clock; ``time.monotonic`` elsewhere): a state confirmed before a
    suspend must not look recent after it, since vacuum elsewhere kept running."""
    if _BOOT_CLOCK is None:
        return time.monotonic()
    return time.clock_gettime(_BOOT_CLOCK)


def is_recent(state: TableState, confirmed_at: float | None) -> bool:
    """Whether ``state``, confirmed the latest at ``confirmed_at`` (``clock()``), is
    recent enough for a blind commit to start from without listing the log."""
    if confirmed_at is None or state.dropped:
        return False
    window_s = state.config.transaction_timeout_ms / 1000 * HELD_STATE_FRACTION
    return clock() - confirmed_at < window_s


class TableHandle:
    """The store, log and cached state of the table stored under ``<name>/`` in ``store``.

    Thread-safe: the cached state only moves forward, whichever thread adopts a state.
    """

    def __init__(
        self, store: Store, name: str, state: TableState, confirmed_at: float | None = None
    ) -> None:
        self.store = store
        self.name = name
        self.prefix = f"{name}/"
        self.log = TableLog(store, self.prefix, name)
        # A table dropped and created again under the same name is another table: its uuid
        # tells the two apart.
        self.table_uuid = state.config.table_uuid
        self._state = state
        # When _state was last known to be the latest (clock(), taken before the
        # listing or the commit that showed it); None when not known.
        self._confirmed_at = confirmed_at
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TableHandle({self.name!r}, version={self.state.version})"

    @property
    def state(self) -> TableState:
        """The latest state this handle has seen, without reading the log."""
        with self._lock:
            return self._state

    def confirmed_state(self) -> tuple[TableState, float | None]:
        """The cached state and when it was last known to be the latest (``clock()``
        before the listing or commit that showed it; None if never), read together."""
        with self._lock:
            return self._state, self._confirmed_at

    def recent_state(self) -> tuple[TableState, float] | None:
        """The cached state and when it was confirmed, if :func:`is_recent`; else None."""
        state, confirmed_at = self.confirmed_state()
        if confirmed_at is None or not is_recent(state, confirmed_at):
            return None
        return state, confirmed_at

    def latest_state(self) -> TableState:
        """The latest state: reads only the commits made since :attr:`state`. Raises
        :class:`~ledger.errors.TableDroppedError` when the table was dropped since the handle
        opened it."""
        asked = clock()
        fresh = self.log.refresh(self.state)
        if fresh.dropped or fresh.config.table_uuid != self.table_uuid:
            raise TableDroppedError(
                f"table {self.name!r} was dropped (version {fresh.version}) after this handle "
                "opened it; open it again with warehouse.table(name)"
            )
        self.adopt(fresh, confirmed_at=asked)
        return fresh

    def adopt(self, state: TableState, confirmed_at: float | None = None) -> None:
        """Cache ``state`` if it is newer than the cached one (e.g. what a commit produced).
        ``confirmed_at``: the ``clock()`` at or after which ``state`` was the latest
        (taken before the listing or the put-if-absent that showed it)."""
        with self._lock:
            if state.version > self._state.version:
                self._state, self._confirmed_at = state, confirmed_at
            elif state.version == self._state.version and confirmed_at is not None:
                self._confirmed_at = max(self._confirmed_at or confirmed_at, confirmed_at)

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
        start = self.latest_state() if base is None else base
        sent = clock()  # before the put-if-absent that makes the state the latest
        state, entry = commit_entry(self.log, start, build, check)
        self.adopt(state, confirmed_at=None if entry is None else sent)
        return state, entry
