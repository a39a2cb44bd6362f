"""A buffered writer: many small writes from many threads, committed as a few large inserts.

>>> with table.writer(max_rows=50_000, max_seconds=2.0) as writer:   # doctest: +SKIP
...     writer.write({"event_id": "e-1", "kind": "click"})
...     writer.write([{"event_id": "e-2", "kind": "view"}, {"event_id": "e-3", "kind": "buy"}])

Each Parquet file and each log commit has a fixed cost, so one row per commit wastes most of what
a table stores and reads. The writer converts every ``write`` at once against the table's schema
(a row that does not fit raises from that ``write`` alone, and nothing of it is buffered), keeps
the converted rows in memory, and inserts them in one transaction when the buffer reaches
``max_rows`` rows or ``max_bytes`` bytes, when its oldest row is ``max_seconds`` old, on
``flush()``, on ``close()`` (also on leaving the ``with`` block, by an exception or not) and at
interpreter exit.

A dict whose every value is of a Python type that plainly fits its column (``str`` for
VARCHAR, ``int`` in range for the integer types, a finite ``float`` for DOUBLE, ``bool`` for
BOOLEAN; for DECIMAL(p,s) a ``Decimal``, an ``int`` or a ``float`` whose digits fit p and s;
``date`` for DATE; a naive ``datetime`` for TIMESTAMP; a ``datetime`` with a zone or ISO text
with an offset for TIMESTAMPTZ; None outside the key) is checked in Python, by a function
compiled once per schema for rows naming every column and once per tuple of column names for
others, and kept as is (appended under one short lock):
converting many such rows together at flush time cannot fail, and costs a fraction of
converting each alone. Other writes of dicts are converted at once, together with other
threads' writes: a call joins the group of calls waiting while another thread converts, and
the group is converted in one pass. If
a group does not convert, each of its calls is converted alone, so only the calls that hold a bad
row raise.

With ``app_id``, the n-th flush commits as batch ``first + n`` of that app (``first`` is one
above the app's last committed batch, so a restarted writer goes on where it stopped). A flush
that failed keeps its rows and its batch number; retrying it can never commit them twice, even
when the failed attempt's commit did land.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import decimal
import logging
import operator
import re
import threading
import time
import uuid
import zoneinfo
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from ledger import arguments
from ledger.errors import (
    BatchTakenError,
    FlushError,
    InvalidArgumentError,
    LedgerError,
    UnknownColumnError,
    WriterClosedError,
)
from ledger.inputs import read_rows
from ledger.log.entries import AppBatch
from ledger.log.table_log import VacuumedLogError
from ledger.schema import TableSchema, conform

if TYPE_CHECKING:
    from ledger.log.state import TableState
    from ledger.table import Table

log = logging.getLogger(__name__)

DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MAX_SECONDS = 5.0
# Writers wait (back-pressure) while the rows not yet committed reach this many times a limit:
# a flush runs meanwhile, and memory stays bounded when the store is slower than the writers.
BACKLOG_FACTOR = 4
# A background flush that failed is tried again after this delay, doubled per failure.
RETRY_DELAY_SECONDS = 0.5
MAX_RETRY_DELAY_SECONDS = 30.0


@dataclass
class _Conversion:
    """One ``write`` call's rows, waiting for the group conversion that takes them."""

    rows: list[Any]
    done: bool = False
    converted: pa.Table | None = None
    error: BaseException | None = None
    position: int = 0


# Row checks are kept per tuple of column names (few in practice); past this many, the cache
# starts again rather than grow without bound on rows of ever new names.
MAX_ROW_CHECKS = 1024


@dataclass(frozen=True, slots=True)
class _Fit:
    """How a value of one Python type is checked against one column: ``text`` (valid UTF-8),
    ``int`` (within ``low``..``high``), ``float`` (finite), ``fixed`` (every value fits),
    ``zoned`` (a datetime whose zone is one of :data:`_ZONES_OF_KNOWN_OFFSET` in years 2 to
    9998 fits as it is; any other goes to ``check``, which returns 0 when it fits) or ``call``
    (``check`` returns the value's size, or None when it does not plainly fit)."""

    kind: str
    size: int
    low: int = 0
    high: int = 0
    check: Callable[[Any], int | None] | None = None


# A row's check: its approximate size in bytes if every value plainly fits, else None.
_RowCheck: TypeAlias = "Callable[[dict[str, Any]], int | None]"


def _never_plain(row: dict[str, Any]) -> int | None:
    """The check of rows whose names alone rule out the plain path (an unknown column, a
    missing key column, no column at all)."""
    return None


# Accepted rows: converted Arrow tables, or plain dicts that convert together at flush time.
_Part: TypeAlias = "pa.Table | list[dict[str, Any]]"


@dataclass
class _Batch:
    """Rows sealed for one commit: their app batch number stays theirs until they commit."""

    parts: list[_Part]
    rows: int
    bytes: int
    end_position: int
    batch: int | None
    # Recorded with the app batch in the log: the commit holding the batch is this one's
    # exactly when it carries this token (a failed attempt's commit may have landed).
    token: str | None
    failed: bool = False  # a commit of it failed: writers waiting for room are told
    converted: pa.Table | None = None


class BufferedWriter:
    """Buffers writes to one table and inserts them in large batches; use ``table.writer()``.

    Thread-safe: ``write`` may be called from any number of threads. A row is *accepted* when
    ``write`` returns (converted, in memory); it is *committed* after the flush that inserts it.
    ``write`` returns a position; ``wait(position)`` blocks until every row accepted up to it is
    committed.
    """

    def __init__(
        self,
        table: Table,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_seconds: float | None = DEFAULT_MAX_SECONDS,
        app_id: str | None = None,
    ) -> None:
        self._table = table
        self._max_rows = arguments.whole_number(max_rows, "max_rows", minimum=1)
        self._max_bytes = arguments.whole_number(max_bytes, "max_bytes", minimum=1)
        self._max_seconds = (
            None if max_seconds is None else arguments.positive_seconds(max_seconds, "max_seconds")
        )
        if app_id is not None and (not isinstance(app_id, str) or not app_id):
            raise InvalidArgumentError(f"app_id must be non-empty text, not {app_id!r}")
        self._app_id = app_id
        self._next_batch = 0
        # A version before any commit of the next batch to commit: where a look for the commit
        # of a batch refused as already committed starts (see _committed_before).
        self._seen_version = 0
        if app_id is not None:
            # Go on after the app's last committed batch: a batch at or below it is a no-op.
            state = table.handle.latest_state()
            self._next_batch = state.apps.get(app_id, -1) + 1
            self._seen_version = state.version
        # The hot path of write() takes the condition's lock directly (the same lock, without
        # the Python-level wrapper of Condition.__enter__).
        self._lock = threading.Lock()
        self._state = threading.Condition(self._lock)
        # The open buffer: rows accepted and not yet sealed into a batch, in order. Its last
        # part is always the list that plain rows are appended to (``_tail``).
        self._tail: list[dict[str, Any]] = []
        self._open_parts: list[_Part] = [self._tail]
        self._open_bytes = 0
        self._open_since: float | None = None  # time.monotonic() at its first row
        self._sealed: deque[_Batch] = deque()
        self._sealed_bytes = 0  # bytes of the sealed batches
        self._accepted = 0  # position of the last accepted row
        self._sealed_through = 0  # position of the last sealed row
        self._committed = 0  # position of the last committed row
        self._failures = 0
        self._error: BaseException | None = None  # the last failed flush, until reported
        self._last_failure: BaseException | None = None
        # Set when another writer committed this writer's app batch: no flush can commit, so
        # none is tried; writes, flushes and waits raise, and close() hands the rows back.
        self._taken: BatchTakenError | None = None
        self._handed_back = 0  # rows close() handed back in BatchTakenError.rows
        self._retry_at = 0.0
        self._retry_delay = RETRY_DELAY_SECONDS
        self._flush_requested = False
        self._closed = False
        self._stopped = False
        self._flushing = threading.Lock()  # one flush at a time commits, in batch order
        self._conversions: list[_Conversion] = []
        self._column_fits: dict[str, dict[type, _Fit]] = {}
        self._plain_keys: frozenset[str] = frozenset()
        self._row_checks: dict[tuple[str, ...], _RowCheck] = {}
        self._full_check: _RowCheck = _never_plain
        self._checks_for: TableSchema | None = None
        self._plain_checks()
        self._backlog_rows = BACKLOG_FACTOR * self._max_rows
        self._backlog_bytes = BACKLOG_FACTOR * self._max_bytes
        # What a plain write compares against, worked out when they change rather than at
        # each write: the position whose row wakes the flusher (the open buffer's first row,
        # to start its max_seconds clock, then its max_rows-th), and the positions and bytes
        # at which the backlog is full.
        self._wake_at = 1
        self._accept_below = self._backlog_rows
        self._bytes_below = self._backlog_bytes
        self._rows_mark = self._bytes_mark = 0
        self._set_marks()
        self._converting = False
        self._thread = threading.Thread(
            target=self._flush_in_background, name=f"ledger-writer-{table.name}", daemon=True
        )
        self._thread.start()
        # Rows accepted but not flushed when the interpreter exits are flushed then.
        atexit.register(self._flush_at_exit)

    def __repr__(self) -> str:
        return (
            f"BufferedWriter({self._table.name!r}, accepted={self._accepted}, "
            f"committed={self._committed})"
        )

    # --- context manager -------------------------------------------------------------------

    def __enter__(self) -> BufferedWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Rows accepted before an exception are committed too; the exception goes on.
        self.close()

    # --- counters ----------------------------------------------------------------------------

    @property
    def accepted_rows(self) -> int:
        """Rows accepted so far (the position of the last one)."""
        return self._accepted

    @property
    def committed_rows(self) -> int:
        """Rows committed so far (every accepted row up to this position)."""
        return self._committed

    @property
    def pending_rows(self) -> int:
        """Rows accepted and not committed yet (nor handed back by ``close()``)."""
        return self._accepted - self._committed - self._handed_back

    @property
    def app_id(self) -> str | None:
        return self._app_id

    # --- writes ------------------------------------------------------------------------------

    def write(self, data: Any) -> int:
        """Accept one row (a dict) or rows (anything ``insert`` takes) and return the position
        of the last accepted row (for :meth:`wait`).

        The rows are converted to the table's types now: rows that do not fit raise here
        (:class:`~ledger.errors.SchemaError` and its kin) and nothing of this call is buffered.
        Raises :class:`~ledger.errors.FlushError` once after a background flush failed (its
        rows stay buffered and are tried again), and
        :class:`~ledger.errors.WriterClosedError` after ``close()``.
        """
        if type(data) is dict:  # the hot path: one row of plain values, one short lock round
            row = data.copy()  # the caller may change its dict after write() returns
            size = self._full_check(row)
            if size is None:  # a row naming some columns, a None, another kind of value
                names = tuple(row)
                size = (self._row_checks.get(names) or self._compile_row_check(names))(row)
            if size is not None:
                # Inline, against two precomputed marks: this runs once per row, from every
                # thread. A write reaching a mark takes the slow path, which checks each limit.
                with self._lock:
                    if (
                        self._accepted >= self._rows_mark
                        or self._open_bytes + size >= self._bytes_mark
                    ):
                        return self._accept_row_locked(row, size)
                    self._tail.append(row)
                    self._open_bytes += size
                    position = self._accepted = self._accepted + 1
                    return position
        if type(data) is dict or isinstance(data, list):
            rows: list[Any] = data if isinstance(data, list) else [data]
            plain, size = self._plain_rows(rows)
            if plain is not None:
                with self._state:  # the hot path: one lock round for the whole write
                    self._admit_locked()
                    return self._accept_part(plain, len(plain), size)
            self._admit()
            if type(data) is not dict or _is_one_row(data):  # else a dict of lists
                return self._write_dicts(rows)
        else:
            self._admit()
            if isinstance(data, Mapping) and _is_one_row(data):
                return self._write_dicts([data])
        tables = self._convert(data)
        with self._state:
            self._ensure_open()
            return self._accept(tables)

    def flush(self) -> int:
        """Commit every accepted row now, in the calling thread; return the rows committed.

        Raises what the commit raised if it fails; the rows stay buffered (with their app batch)
        for the next flush."""
        with self._state:
            self._flush_requested = False
            self._seal()
            if self._taken is not None and self._sealed:
                raise self._taken_refusal()
        return self._commit_sealed(in_background=False)

    def wait(self, position: int, timeout: float | None = None) -> None:
        """Block until every row accepted up to ``position`` (a value ``write`` returned) is
        committed. Raises :class:`~ledger.errors.FlushError` if a flush fails meanwhile (the
        rows stay buffered and are tried again) and :class:`TimeoutError` after ``timeout``
        seconds. A flush is started at once rather than at the next size or age limit."""
        position = arguments.whole_number(position, "position")
        if position > self._accepted:
            raise InvalidArgumentError(
                f"position {position} was never returned by write(): {self._accepted} rows "
                "were accepted so far"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._state:
            failures = self._failures
            if self._committed < position:
                self._flush_requested = True
                self._state.notify_all()
            while self._committed < position:
                if self._taken is not None:
                    raise self._taken_refusal()
                if self._failures != failures:
                    raise FlushError(
                        f"a flush of table {self._table.name!r} failed before position "
                        f"{position} was committed: {self._last_failure}; the rows stay "
                        "buffered and are tried again"
                    ) from self._last_failure
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"rows up to position {position} of table {self._table.name!r} were "
                        f"not committed within {timeout} s ({self._committed} are)"
                    )
                self._state.wait(remaining)

    def close(self) -> None:
        """Refuse further writes, commit every accepted row and stop the background flusher.
        Raises what the last commit raised if it fails (the rows stay buffered: ``flush()``
        tries again, and so does interpreter exit). When another writer took this writer's app
        batch, raises :class:`~ledger.errors.BatchTakenError` holding the rows not committed in
        ``rows`` and keeps none of them: write them with a writer of an ``app_id`` of its own."""
        with self._state:
            self._closed = True
            self._stopped = True
            self._set_marks()
            self._state.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()
        if self._taken is None:
            with contextlib.suppress(BatchTakenError):  # its rows are handed back below
                self.flush()
        if self._taken is not None:
            self._hand_back()
        self.flush()
        atexit.unregister(self._flush_at_exit)

    def _taken_refusal(self) -> BatchTakenError:
        """The error of any call after another writer took this writer's app batch."""
        error = BatchTakenError(
            f"{self._taken}. This writer commits nothing more: close() it, which raises "
            f"BatchTakenError with its {self.pending_rows} rows in .rows, and write them with "
            "a writer that has an app_id of its own"
        )
        error.__cause__ = self._taken
        return error

    def _hand_back(self) -> None:
        """Raise BatchTakenError holding every row not committed, which the writer no longer
        holds (``close()`` of a writer whose batch was taken: nothing of it can commit)."""
        with self._flushing, self._state:
            self._seal()
            batches, rows = list(self._sealed), self._accepted - self._committed
            rows -= self._handed_back
            if not batches:
                return
            self._sealed.clear()
            self._sealed_bytes = 0
            self._handed_back += rows
            self._set_backlog_limits()
        tables = []
        for batch in batches:
            tables.append(
                batch.converted
                if batch.converted is not None
                else _concat(
                    [p if isinstance(p, pa.Table) else self._convert_plain(p) for p in batch.parts]
                )
            )
        atexit.unregister(self._flush_at_exit)  # the caller holds the rows now
        raise BatchTakenError(
            f"{self._taken}. The writer is closed and hands back its {rows} rows not committed "
            "in this error's .rows: write them with a writer that has an app_id of its own",
            rows=_concat(tables),
        ) from self._taken

    # --- internals: accepting rows ------------------------------------------------------------

    def _admit(self) -> None:
        with self._state:
            self._admit_locked()

    def _admit_locked(self) -> None:
        """Before a write (the state lock is held): refuse it when closed; report a failed
        background flush once; wait while the backlog is full and a flush is making room."""
        while True:  # every failure wakes the waiting writes (notify_all): each raises
            self._ensure_open()
            if self._taken is not None:
                raise self._taken_refusal()
            if self._error is not None:
                error, self._error = self._error, None
                self._set_marks()
                raise FlushError(
                    f"a background flush of table {self._table.name!r} failed: {error}; its "
                    f"{self.pending_rows} rows stay buffered and are tried again (this write "
                    "was not accepted: write it again)"
                ) from error
            if not self._backlog_full():
                return
            if self._sealed and self._sealed[0].failed:
                raise FlushError(
                    f"the buffer of table {self._table.name!r} is full ({self.pending_rows} "
                    f"rows) and its flushes fail ({self._last_failure}); this write was not "
                    "accepted: write it again later"
                ) from self._last_failure
            self._flush_requested = True
            self._state.notify_all()
            self._state.wait(0.1)

    def _backlog_full(self) -> bool:
        pending = self._accepted - self._committed
        backlog_bytes = self._open_bytes + self._sealed_bytes
        return pending >= self._backlog_rows or backlog_bytes >= self._backlog_bytes

    def _set_backlog_limits(self) -> None:
        """After a seal or a commit (the state lock is held): the limits a plain write checks."""
        self._accept_below = self._committed + self._backlog_rows
        self._bytes_below = self._backlog_bytes - self._sealed_bytes
        self._set_marks()

    def _set_marks(self) -> None:
        """After any limit, the open state or the error changed (the state lock is held): the
        marks a plain write compares against. Below both, it is accepted as it is: open, no
        failed flush to report, room in the backlog and no reason to wake the flusher. At or
        past either, :meth:`_accept_row_locked` checks each limit itself."""
        blocked = self._closed or self._error is not None or self._taken is not None
        self._rows_mark = -1 if blocked else min(self._accept_below, self._wake_at - 1)
        self._bytes_mark = min(self._max_bytes, self._bytes_below)

    def _accept_row_locked(self, row: dict[str, Any], size: int) -> int:
        """A plain row past a mark (the state lock is held): refused when closed or a failed
        flush is to be reported, held while the backlog is full, then accepted, waking the
        flusher at the open buffer's first row and at its limits."""
        self._admit_locked()
        self._tail.append(row)
        self._open_bytes += size
        position = self._accepted = self._accepted + 1
        if position >= self._wake_at or self._open_bytes >= self._max_bytes:
            self._wake_flusher()
        return position

    def _ensure_open(self) -> None:
        if self._closed:
            raise WriterClosedError(
                f"the writer of table {self._table.name!r} is closed; open a new one with "
                "table.writer()"
            )

    def _write_dicts(self, rows: list[Any]) -> int:
        """Convert ``rows`` together with other threads' pending rows: the first caller to find
        no conversion running converts every pending call in one pass."""
        mine = _Conversion(rows)
        with self._state:
            self._conversions.append(mine)
            while self._converting and not mine.done:
                self._state.wait()
            if not mine.done:
                group, self._conversions = self._conversions, []
                self._converting = True
        if not mine.done:
            self._convert_group(group)
        if mine.error is not None:
            raise mine.error
        return mine.position

    def _convert_group(self, group: list[_Conversion]) -> None:
        try:
            self._convert_each(group)
        finally:
            with self._state:
                accepted = [c.converted for c in group if c.converted is not None]
                if self._closed and accepted:
                    for conversion in group:
                        conversion.converted = None
                        conversion.error = WriterClosedError(
                            f"the writer of table {self._table.name!r} was closed while this "
                            "write was converted; nothing of it was accepted"
                        )
                else:
                    for conversion in group:
                        if conversion.converted is not None:
                            conversion.position = self._accept([conversion.converted])
                for conversion in group:
                    conversion.done = True
                self._converting = False
                self._state.notify_all()

    def _convert_each(self, group: list[_Conversion]) -> None:
        """One pass for the calls that can share one; if it fails, one pass per call, so that
        only the calls holding a bad row get an error."""
        # An empty dict is no row on its own but a row of NULLs beside others: alone, always.
        shared = [c for c in group if all(type(r) is dict and r for r in c.rows)]
        if len(shared) > 1:
            try:
                whole = self._convert([row for c in shared for row in c.rows])
            except (LedgerError, ValueError, TypeError):
                pass
            else:
                table = _concat(whole)
                start = 0
                for conversion in shared:
                    conversion.converted = table.slice(start, len(conversion.rows))
                    start += len(conversion.rows)
        for conversion in group:
            if conversion.converted is not None:
                continue
            try:
                conversion.converted = _concat(self._convert(conversion.rows))
            except BaseException as e:
                conversion.error = e

    def _convert(self, data: Any) -> list[pa.Table]:
        """``data`` in the table's column types, as ``insert`` would write it (which reads the
        latest schema: a column another writer added since this handle last looked is known
        after a refresh)."""
        try:
            return self._convert_with(self._table.handle.state, data)
        except UnknownColumnError:
            if isinstance(data, list | Mapping | pa.Table | pa.RecordBatch):  # read it again
                return self._convert_with(self._table.handle.latest_state(), data)
            raise

    def _convert_plain(self, rows: list[dict[str, Any]]) -> pa.Table:
        """Plain rows (each value checked to fit its column) in the table's column types: built
        column by column in those types when every row names the same columns of kinds Arrow
        takes as they are (see :func:`_direct_table`), else as ``insert`` converts rows."""
        state = self._table.handle.state
        table = _direct_table(rows, state.schema)
        if table is None:
            return _concat(self._convert(rows))
        key_columns = () if state.config.generated_row_id else state.config.key_columns
        return conform(table, state.schema, key_columns=key_columns)[0]

    def _convert_with(self, state: TableState, data: Any) -> list[pa.Table]:
        key_columns = () if state.config.generated_row_id else state.config.key_columns
        # A source of columns and no rows has its columns checked, as insert checks them.
        return [
            conform(
                chunk.table,
                state.schema,
                key_columns=key_columns,
                require_all_keys=bool(chunk.num_rows),
                new_column_advice=_WRITER_NEW_COLUMN_ADVICE,
            )[0]
            for chunk in read_rows(data, state.schema, store=self._table.store, empty_sources=True)
        ]

    def _accept(self, tables: list[pa.Table]) -> int:
        """Add converted rows to the buffer (the state lock is held); return their position."""
        for table in tables:
            if table.num_rows:
                self._accept_part(table, table.num_rows, table.nbytes)
        return self._accepted

    def _accept_part(self, part: _Part, rows: int, size: int) -> int:
        """Add rows to the open buffer (the state lock is held); return their position."""
        if rows:
            if isinstance(part, list):
                self._tail.extend(part)  # one list of plain rows, converted in one pass
            else:
                self._tail = []
                self._open_parts += [part, self._tail]
            self._open_bytes += size
            self._accepted += rows
            if self._accepted >= self._wake_at or self._open_bytes >= self._max_bytes:
                self._wake_flusher()
        return self._accepted

    def _wake_flusher(self) -> None:
        """At the open buffer's first row the idle flusher starts its clock for max_seconds;
        at its limits it seals (the state lock is held)."""
        if self._open_since is None:
            self._open_since = time.monotonic()
        self._wake_at = self._sealed_through + self._max_rows
        self._set_marks()
        self._state.notify_all()

    def _plain_row(self, row: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        """A copy of one row and its approximate size if every value plainly fits its column,
        else None. The check of a tuple of names is compiled once (few in practice), then
        costs one call per row.

        The checks are those of the schema as of the last flush (or the writer's start), not
        looked up at every write: a schema only gains columns and widens integer and float
        columns, so an older schema's checks accept nothing the latest schema would refuse."""
        copy = row.copy()  # the caller may change its dict after write() returns
        names = tuple(copy)
        check = self._row_checks.get(names)
        if check is None:
            check = self._compile_row_check(names)
        size = check(copy)
        return None if size is None else (copy, size)

    def _compile_row_check(self, names: tuple[str, ...]) -> _RowCheck:
        checks = self._row_checks
        if len(checks) >= MAX_ROW_CHECKS:
            checks.clear()
        check = checks[names] = _row_check(names, self._column_fits, self._plain_keys)
        return check

    def _plain_rows(self, rows: list[Any]) -> tuple[list[dict[str, Any]] | None, int]:
        """Copies of ``rows`` and their approximate size if every value plainly fits its column
        (see the module docstring); (None, 0) if any row needs a conversion first."""
        self._plain_checks()
        copies: list[dict[str, Any]] = []
        size = 0
        for row in rows:
            if type(row) is not dict:
                return None, 0
            checked = self._plain_row(row)
            if checked is None:
                return None, 0
            copies.append(checked[0])
            size += checked[1]
        return copies, size

    def _plain_checks(self) -> None:
        state = self._table.handle.state
        if self._checks_for is not state.schema:
            config = state.config
            self._column_fits = _column_fits(state.schema)
            self._plain_keys = frozenset(() if config.generated_row_id else config.key_columns)
            self._row_checks = {}
            self._full_check = _full_row_check(
                tuple(state.schema.names), self._column_fits, self._plain_keys
            )
            self._checks_for = state.schema

    def _limit_reached(self) -> bool:
        open_rows = self._accepted - self._sealed_through
        return open_rows >= self._max_rows or self._open_bytes >= self._max_bytes

    # --- internals: flushing -------------------------------------------------------------------

    def _seal(self) -> None:
        """Turn the open buffer into the next batch to commit (the state lock is held)."""
        self._plain_checks()  # later writes are checked against the schema as it is now
        rows = self._accepted - self._sealed_through
        if not rows:
            return
        batch = token = None
        if self._app_id is not None:
            batch, self._next_batch = self._next_batch, self._next_batch + 1
            token = uuid.uuid4().hex
        parts = [part for part in self._open_parts if not isinstance(part, list) or part]
        self._sealed.append(_Batch(parts, rows, self._open_bytes, self._accepted, batch, token))
        self._sealed_bytes += self._open_bytes
        self._tail = []
        self._open_parts = [self._tail]
        self._open_bytes = 0
        self._open_since = None
        self._sealed_through = self._accepted
        self._wake_at = self._accepted + 1
        self._set_backlog_limits()

    def _commit_sealed(self, *, in_background: bool) -> int:
        """Commit the sealed batches in order; stop at the first failure (it stays first). A
        background failure is reported at the next write (a caller of flush() gets its own)."""
        committed = 0
        with self._flushing:
            while True:
                with self._state:
                    if not self._sealed:
                        return committed
                    head = self._sealed[0]
                try:
                    self._commit_batch(head)
                except BaseException as e:
                    with self._state:
                        head.failed = True
                        if isinstance(e, BatchTakenError):
                            self._taken = e
                        self._failures += 1
                        self._last_failure = e
                        if in_background:
                            self._error = e
                            self._set_marks()
                        self._state.notify_all()
                    raise
                with self._state:
                    self._sealed.popleft()
                    self._sealed_bytes -= head.bytes
                    self._committed = head.end_position
                    self._error = None
                    self._set_backlog_limits()
                    self._retry_delay = RETRY_DELAY_SECONDS
                    self._state.notify_all()
                committed += head.rows

    def _commit_batch(self, head: _Batch) -> None:
        if head.converted is None:
            # Plain rows are converted here, outside the state lock: writers go on meanwhile.
            head.converted = _concat(
                [p if isinstance(p, pa.Table) else self._convert_plain(p) for p in head.parts]
            )
            head.parts = []
        info = self._table._insert_blind(
            head.converted, self._app_id, head.batch, False, app_token=head.token
        )
        if info.version is not None:
            self._seen_version = info.version
            return
        if self._app_id is None:
            return
        # Already committed: by an earlier attempt of this batch whose answer was lost (a
        # replay: its rows are in), or by another writer under this app_id (these rows would
        # be dropped as a replay). Only the token recorded in the commit tells them apart.
        own, vacuumed = self._committed_before(head)
        if own:
            return
        raise BatchTakenError(
            f"batch {head.batch} of app {self._app_id!r} on table {self._table.name!r} was "
            "already committed by another writer; an app_id must belong to one writer at a "
            "time. The rows stay buffered"
            + (
                " (the log since this writer's last commit was vacuumed, so whether an "
                "earlier attempt of this batch committed them cannot be told: check the table "
                "before writing them again)"
                if vacuumed
                else ""
            )
        )

    def _committed_before(self, head: _Batch) -> tuple[bool, bool]:
        """Whether a commit of ``head`` by this writer is in the log (an earlier attempt that
        landed), and whether the log since this writer last looked was vacuumed (then it cannot
        be told, and the rows are kept rather than dropped)."""
        try:
            commits = self._table.handle.log.commits_after(self._seen_version)
        except VacuumedLogError:
            return False, True
        mine = AppBatch(str(self._app_id), int(head.batch or 0), head.token)
        own = next((commit for commit in commits if commit.app == mine), None)
        if own is None:
            return False, False
        self._seen_version = own.version
        return True, False

    def _flush_in_background(self) -> None:
        while True:
            with self._state:
                while not self._stopped and not self._flush_due():
                    self._state.wait(self._seconds_until_due())
                if self._stopped:
                    return
                self._flush_requested = False
                self._seal()
            try:
                self._commit_sealed(in_background=True)
            except BaseException as e:
                log.warning(
                    "flush of table %r failed (%s); %d rows stay buffered and are retried"
                    if self._taken is None
                    else "flush of table %r failed (%s); %d rows stay buffered until close()",
                    self._table.name,
                    e,
                    self.pending_rows,
                )
                with self._state:
                    self._retry_at = time.monotonic() + self._retry_delay
                    self._retry_delay = min(self._retry_delay * 2, MAX_RETRY_DELAY_SECONDS)

    def _flush_due(self) -> bool:
        if self._taken is not None:  # no flush can commit; close() hands the rows back
            return False
        if self._accepted == self._sealed_through and not self._sealed:
            return False
        if time.monotonic() < self._retry_at:
            return False
        if self._sealed or self._flush_requested or self._limit_reached():
            return True
        oldest = self._open_since
        return (
            self._max_seconds is not None
            and oldest is not None
            and time.monotonic() - oldest >= self._max_seconds
        )

    def _seconds_until_due(self) -> float | None:
        now = time.monotonic()
        if now < self._retry_at:
            return self._retry_at - now
        if self._max_seconds is None or self._open_since is None:
            return None
        return max(0.0, self._open_since + self._max_seconds - now)

    def _flush_at_exit(self) -> None:
        try:
            self.close()
        except BaseException as e:
            handed_back = e.rows if isinstance(e, BatchTakenError) else None
            log.error(
                "table %r: %d buffered rows could not be committed at exit: %s",
                self._table.name,
                self.pending_rows if handed_back is None else handed_back.num_rows,
                e,
            )


# Column types whose plainly fitting values (text, booleans, finite floats, integers in range,
# dates: one Python kind each, see _column_fits) Arrow converts given the type exactly as it
# infers and casts them in insert, so plain rows skip the inference and the checks for mixed
# kinds, numbers given as text and the like, which such values never need.
_DIRECT_TYPES = (
    pa.types.is_string,
    pa.types.is_boolean,
    pa.types.is_float64,
    pa.types.is_signed_integer,
    pa.types.is_date32,
)


def _direct_table(rows: list[dict[str, Any]], schema: TableSchema) -> pa.Table | None:
    """Plain rows as one Arrow table in ``schema``'s types, each column built from its values
    in one call, when every row names the same columns and each is of a type in
    :data:`_DIRECT_TYPES` or a TIMESTAMPTZ holding datetimes alone; None otherwise (the rows
    then take the conversion ``insert`` does)."""
    if not rows:
        return None
    names = list(rows[0])
    known = set(schema.names)
    if not names or set(map(len, rows)) != {len(names)} or not known.issuperset(names):
        return None
    types = [schema.type_of(name) for name in names]
    if not all(_is_direct(t) for t in types):
        return None
    columns = []
    for name, kind in zip(names, types, strict=True):
        try:
            values = list(map(operator.itemgetter(name), rows))
        except KeyError:  # a row names other columns than the first
            return None
        if _is_zoned(kind) and not set(map(type, values)) <= _DIRECT_ZONED_KINDS:
            return None  # ISO text beside the datetimes: Arrow's typed conversion takes no text
        columns.append(pa.array(values, type=kind))
    return pa.Table.from_arrays(columns, names=names)


def _is_zoned(kind: pa.DataType) -> bool:
    return pa.types.is_timestamp(kind) and kind.tz is not None


def _is_direct(kind: pa.DataType) -> bool:
    return any(is_kind(kind) for is_kind in _DIRECT_TYPES) or _is_zoned(kind)


# A TIMESTAMPTZ column is built directly from datetimes with a zone (each taken at its own UTC
# offset, as insert takes it) and None; the plain check let through no other datetime.
_DIRECT_ZONED_KINDS = frozenset({dt.datetime, type(None)})


def _column_fits(schema: TableSchema) -> dict[str, dict[type, _Fit]]:
    """Per column that has any, the Python types whose values plainly fit it, each with the
    check its values still need. A value passing its check converts at flush time, alone or
    among any other values that pass, to what ``insert`` would store for it alone."""
    fits: dict[str, dict[type, _Fit]] = {}
    for name in schema.names:
        arrow_type = schema.type_of(name)
        if pa.types.is_string(arrow_type):
            fits[name] = {str: _Fit("text", 4)}
        elif pa.types.is_boolean(arrow_type):
            fits[name] = {bool: _Fit("fixed", 1)}
        elif pa.types.is_float64(arrow_type):
            fits[name] = {float: _Fit("float", 8)}
        elif pa.types.is_signed_integer(arrow_type):
            bits = arrow_type.bit_width
            fits[name] = {int: _Fit("int", 8, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)}
        elif pa.types.is_decimal128(arrow_type):
            fits[name] = _decimal_fits(arrow_type.precision, arrow_type.scale)
        elif pa.types.is_date32(arrow_type):
            fits[name] = {dt.date: _Fit("fixed", 4)}
        elif pa.types.is_timestamp(arrow_type) and arrow_type.tz is None:
            fits[name] = {dt.datetime: _Fit("call", 8, check=_naive_time_size)}
        elif pa.types.is_timestamp(arrow_type):
            fits[name] = {
                dt.datetime: _Fit("zoned", 8, check=_zoned_time_size),
                str: _Fit("call", 0, check=_zoned_text_size),
            }
    return fits


def _row_check(
    names: tuple[str, ...], fits: Mapping[str, Mapping[type, _Fit]], keys: frozenset[str]
) -> _RowCheck:
    """The check of rows naming ``names`` in this order: straight-line code, compiled once per
    tuple of names, that tests each value's exact type against its column's fits and returns
    the row's approximate size, or None when a value needs a conversion. Rows of one source
    share their names, so a write costs one call and a few comparisons per value, with no
    loop and no lookup per value (a loop over per-column checks costs about twice as much).

    Only positions and names bound in the function's namespace appear in its source: column
    names and values never do."""
    if not names or not keys.issubset(names) or not all(name in fits for name in names):
        return _never_plain
    namespace: dict[str, Any] = {"_encodes": _encodes, "_zones": _ZONES_OF_KNOWN_OFFSET}
    lines = [
        "def check(row):",
        f"    ({''.join(f'v{i}, ' for i in range(len(names)))}) = row.values()",
    ]
    lines.append("    size = 0")
    for i, name in enumerate(names):
        value = f"v{i}"
        branch = "if"
        if name not in keys:  # None is NULL outside the key
            lines += [f"    if {value} is None:", "        size += 1"]
            branch = "elif"
        for j, (kind, fit) in enumerate(fits[name].items()):
            type_name, fit_name = f"t{i}_{j}", f"f{i}_{j}"
            namespace[type_name], namespace[fit_name] = kind, fit.check
            test, size = _fit_test(value, fit, fit_name)
            condition = f"type({value}) is {type_name}" + (f" and {test}" if test else "")
            lines += [f"    {branch} {condition}:", f"        size += {size}"]
            branch = "elif"
        lines += ["    else:", "        return None"]
    lines.append("    return size")
    exec("\n".join(lines), namespace)  # the source names positions only, never user text
    check: _RowCheck = namespace["check"]
    return check


def _full_row_check(
    names: tuple[str, ...], fits: Mapping[str, Mapping[type, _Fit]], keys: frozenset[str]
) -> _RowCheck:
    """The check of rows naming every column of the table (``names``), in any order: one
    expression that looks each value up by its column's name and tests it against the column's
    first fit, compiled once per schema. It returns the row's size, or None for any other row
    (other names, a None, a value of a column's other fits), which the check of its tuple of
    names (:func:`_row_check`) then takes; a row it accepts, that check accepts with the same
    size. Rows of most sources name every column, so most writes skip building and looking up
    their tuple of names.

    Only positions and names bound in the function's namespace appear in its source: column
    names and values never do."""
    if not names or not keys.issubset(names) or not all(fits.get(name) for name in names):
        return _never_plain
    namespace: dict[str, Any] = {"_encodes": _encodes, "_zones": _ZONES_OF_KNOWN_OFFSET}
    lookups, tests, sizes = [], [], []
    for i, name in enumerate(names):
        value, kind_name, fit_name, name_name = f"v{i}", f"t{i}", f"f{i}", f"n{i}"
        kind, fit = next(iter(fits[name].items()))
        namespace[kind_name], namespace[fit_name], namespace[name_name] = kind, fit.check, name
        test, size = _fit_test(value, fit, fit_name, size_name=f"s{i}")
        lookups.append(f"        {value} = row[{name_name}]")
        tests.append(f"type({value}) is {kind_name}" + (f" and {test}" if test else ""))
        sizes.append(f"({size})")
    lines = [
        "def check(row):",
        f"    if len(row) != {len(names)}:",
        "        return None",
        "    try:",
        *lookups,
        "    except KeyError:",
        "        return None",
        f"    if {' and '.join(f'({t})' for t in tests)}:",
        f"        return {' + '.join(sizes)}",
        "    return None",
    ]
    exec("\n".join(lines), namespace)  # the source names positions only, never user text
    check: _RowCheck = namespace["check"]
    return check


def _fit_test(value: str, fit: _Fit, fit_name: str, size_name: str = "n") -> tuple[str, str]:
    """The test (beyond the value's type) and the size expression of one fit, as source
    (``size_name`` holds the size a ``call`` fit's check returned)."""
    if fit.kind == "text":
        return f"({value}.isascii() or _encodes({value}))", f"{fit.size} + len({value})"
    if fit.kind == "int":
        return f"{fit.low!r} <= {value} <= {fit.high!r}", f"{fit.size}"
    if fit.kind == "float":
        # x - x is 0.0 for a finite float, NaN for NaN and the infinities: no call needed.
        return f"{value} - {value} == 0.0", f"{fit.size}"
    if fit.kind == "zoned":
        # Inline for the zones whose offset is always known: a call per row cost a third of
        # a write of such a row.
        known = f"type({value}.tzinfo) in _zones and 1 < {value}.year < 9999"
        return f"({known} or {fit_name}({value}) is not None)", f"{fit.size}"
    if fit.kind == "call":
        return f"({size_name} := {fit_name}({value})) is not None", f"{fit.size} + {size_name}"
    return "", f"{fit.size}"


def _decimal_fits(precision: int, scale: int) -> dict[type, _Fit]:
    """A DECIMAL(p,s) takes plainly a Decimal of at most s places and p - s whole digits (so
    any number of them together make an Arrow decimal type that widens into the column), an
    int64 of at most p - s digits, and a float whose shortest text (the digits ``repr``
    prints, as ``insert`` reads a float) has at most s places and p - s whole digits."""
    whole_digits = precision - scale
    limit = min(10**whole_digits, 1 << 63)

    def decimal_size(value: decimal.Decimal) -> int | None:
        if not value.is_finite():
            return None
        _, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)  # a finite Decimal's exponent is a number
        if exponent < -scale or len(digits) + exponent > whole_digits:
            return None
        return 16

    # Below 1e16 repr() never uses an exponent, and 10.0**k is exact for every k up to 16.
    float_limit = 10.0 ** min(whole_digits, 16)

    def float_size(value: float) -> int | None:
        if not abs(value) < float_limit:  # also NaN and infinities
            return None
        text = repr(value)
        if "e" in text or len(text.rstrip("0")) - text.index(".") - 1 > scale:
            return None
        return 16

    return {
        decimal.Decimal: _Fit("call", 0, check=decimal_size),
        int: _Fit("int", 16, -(limit - 1), limit - 1),
        float: _Fit("call", 0, check=float_size),
    }


def _naive_time_size(value: dt.datetime) -> int | None:
    """A TIMESTAMP takes a datetime without a zone plainly (with one, it is converted)."""
    return 0 if value.tzinfo is None else None


# Zones whose utcoffset() of any datetime is an offset: it neither fails nor is None.
_ZONES_OF_KNOWN_OFFSET = frozenset({dt.timezone, zoneinfo.ZoneInfo})


def _zoned_time_size(value: dt.datetime) -> int | None:
    """A TIMESTAMPTZ takes a datetime with a zone; in years 1 and 9999 its UTC time may fall
    outside the calendar range, which only the conversion tells."""
    if value.tzinfo is None or not 1 < value.year < 9999:
        return None
    try:
        offset = value.utcoffset()
    except Exception:  # a tzinfo of the caller's own that fails: the conversion reports it
        return None
    return None if offset is None else 0


# ISO text with an offset that Arrow's parser reads as Python's fromisoformat does: every field
# within its range, so only the day of the month is left to check against the calendar.
_ZONED_TEXT = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[T ]([01]\d|2[0-3]):[0-5]\d"
    r"(:[0-5]\d(\.\d{1,6})?)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
)


def _zoned_text_size(text: str) -> int | None:
    """A TIMESTAMPTZ takes plainly ISO text with an offset, a valid day, in years 2 to 9998
    (an offset may move years 1 and 9999 out of the calendar range)."""
    match = _ZONED_TEXT.fullmatch(text)
    if match is None or not 1 < int(match[1]) < 9999:
        return None
    try:
        dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:  # 2023-02-29
        return None
    return len(text)


def _encodes(text: str) -> bool:
    """False for text holding a lone surrogate, which is not UTF-8."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


_WRITER_NEW_COLUMN_ADVICE = (
    "A writer adds no columns: add {columns} with table.insert(rows, evolve_schema=True) (or in "
    "a table.transaction(evolve_schema=True)), then write them here: the writer reads the new "
    "schema"
)


def _is_one_row(data: Mapping[Any, Any]) -> bool:
    """A dict is one row unless every value is a list of values (a dict of lists, as
    ``insert`` reads it)."""
    return not data or any(
        isinstance(v, str | bytes | Mapping) or not hasattr(v, "__len__") for v in data.values()
    )


def _concat(tables: list[pa.Table]) -> pa.Table:
    """Rows of calls that named different columns: an absent column is NULL (an insert).
    Parts converted before and after another writer widened a column (INTEGER to BIGINT,
    FLOAT to DOUBLE) take the wider type: a schema only ever widens, and the insert then
    converts every part to the latest one."""
    if len(tables) == 1:
        return tables[0]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


__all__ = ["BufferedWriter"]
