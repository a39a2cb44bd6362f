"""A ledger table: writes (each its own transaction unless grouped) and snapshot reads.

>>> t = wh.table("accounts")                                     # doctest: +SKIP
>>> t.upsert([{"account": "A-1", "amount": 100}])                # doctest: +SKIP
>>> t.scan().aggregate("sum(dml_type * amount)").fetchall()      # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ledger import arguments, hooks
from ledger import insert_transform as transforms
from ledger import rollup as rollups
from ledger.buffered_writer import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_MAX_SECONDS,
    BufferedWriter,
)
from ledger.engines.duckdb.session import release_read_sessions
from ledger.errors import (
    ConflictError,
    InsertTransformError,
    InvalidArgumentError,
    MissingDependencyError,
    SchemaError,
    SnapshotNotFoundError,
    TableDroppedError,
    TypeMismatchError,
)
from ledger.inputs import read_rows, refused_dict_row
from ledger.log.entries import LogFile
from ledger.log.handle import TableHandle
from ledger.log.state import TableState
from ledger.maintenance import merge as merging
from ledger.maintenance import partitions as partition_ops
from ledger.maintenance import vacuum as vacuuming
from ledger.reads import visible as reads
from ledger.reads.partition_counts import count_rows, rows_of
from ledger.rollup import Rollup
from ledger.schema import ROW_ID, conform
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.storage import Store
from ledger.transaction import (
    CommitInfo,
    HeldSnapshotOutdatedError,
    ReservedAheadTakenError,
    Transaction,
    cast_row_ids,
    refuse_ungenerated_row_ids,
)

if TYPE_CHECKING:
    import duckdb
    import pandas as pd  # type: ignore[import-untyped]
    import polars as pl

AUTO_RETRIES = 5
RETRY_BACKOFF_BASE_S = 0.05
RETRY_BACKOFF_CAP_S = 5.0


@dataclass(frozen=True)
class CommitRecord:
    """One entry of :meth:`Table.history`.

    ``inserted`` and ``deleted`` count logical rows. ``deleted`` is None for a partition drop
    whose rows the log alone does not know (see docs/merges.md section 3); ``entries_removed``
    counts the entries (delete marks included) a partition drop or rewrite removed, 0 for other
    commits.

    ``apps`` holds every app batch the commit carries, ``{app_id: batch}`` (docs/concepts.md 6):
    none for most commits, one for an idempotent write, one per file for a ``ledger load`` of a
    folder or glob. ``app_id`` and ``batch`` are those of the commit's single app batch, None
    when it carries none or several (then only ``apps`` names them)."""

    version: int
    timestamp: dt.datetime
    operation: str
    trx_id: int | None
    files_added: int
    files_removed: int
    inserted: int
    deleted: int | None
    app_id: str | None
    batch: int | None
    entries_removed: int = 0
    apps: Mapping[str, int] = field(default_factory=dict)


class Table:
    """A handle on one table. Cheap to keep; reads refresh it incrementally from the log.

    ``table.handle`` (a :class:`~ledger.log.handle.TableHandle`) holds its store, log and cached
    state: what transactions, maintenance, rollups and engines read and commit through.
    """

    def __init__(
        self, store: Store, name: str, state: TableState, confirmed_at: float | None = None
    ) -> None:
        # confirmed_at: the ledger.log.handle.clock() before the read or create that made ``state``.
        self.handle = TableHandle(store, name, state, confirmed_at)
        self.store = store
        self.name = name
        self.prefix = self.handle.prefix
        # Whether a blind insert reserves its id ahead of the listing of _trx/ (see insert).
        self._reserve_ahead = True

    def __repr__(self) -> str:
        return f"Table({self.name!r}, version={self.handle.state.version})"

    # --- description ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The latest version this handle has seen (call :meth:`refresh` to look for newer)."""
        return self.handle.state.version

    @property
    def schema(self) -> dict[str, str]:
        """User columns and their SQL types."""
        return self.handle.state.schema.to_json()

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.handle.state.schema.arrow()

    @property
    def primary_key(self) -> tuple[str, ...]:
        return self.handle.state.config.primary_key

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.handle.state.config.partition_by

    @property
    def config(self) -> dict[str, Any]:
        return self.handle.state.config.to_json()

    # --- state ---------------------------------------------------------------------------------

    def refresh(self) -> Table:
        """Read commits made since this handle's version (a listing with start-after)."""
        self.handle.latest_state()
        return self

    # --- reads ---------------------------------------------------------------------------------

    def snapshot(
        self, version: int | None = None, timestamp: dt.datetime | int | None = None
    ) -> Snapshot:
        """The table at ``version``, at the last commit at or before ``timestamp`` (a datetime
        or epoch milliseconds), or at the latest version."""
        version = arguments.version(version)
        timestamp_ms = arguments.timestamp_ms(timestamp)
        if version is not None and timestamp_ms is not None:
            raise InvalidArgumentError("pass version or timestamp, not both")
        if timestamp_ms is not None:
            version = self._version_at(timestamp_ms)
        cached = self.handle.state
        if version is None:
            state = self.handle.latest_state()
        elif version == cached.version:
            state = cached
        else:
            state = self.handle.log.load(version)
            if state.config.table_uuid != self.handle.table_uuid:
                raise SnapshotNotFoundError(
                    f"version {version} of {self.name!r} is from before this table was created: "
                    "it belongs to an earlier, dropped table of the same name"
                )
            self._check_not_vacuumed(state)
        return Snapshot(self.name, self.store, self.prefix, state)

    def _check_not_vacuumed(self, state: TableState) -> None:
        """An old version whose files vacuum deleted (their markers are gone from the latest
        state) cannot be read any more."""
        latest = self.handle.latest_state()
        gone = [m.path for m in state.alive_files if m.path not in latest.files]
        if gone:
            raise SnapshotNotFoundError(
                f"version {state.version} of {self.name!r} is older than vacuum's grace period: "
                f"{len(gone)} of its data files were deleted (e.g. {gone[0]}); read a newer version"
            )

    def files(
        self,
        partitions: PartitionFilter = None,
        *,
        version: int | None = None,
        timestamp: dt.datetime | int | None = None,
    ) -> list[str]:
        """Paths or URIs of the alive data files (for any Parquet reader)."""
        return self.snapshot(version, timestamp).files(partitions)

    def scan(
        self,
        partitions: PartitionFilter = None,
        *,
        version: int | None = None,
        timestamp: dt.datetime | int | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """The raw ledger as a DuckDB relation; partitions are pruned from the log first."""
        return self.snapshot(version, timestamp).scan(partitions, con=con)

    def count(
        self,
        partitions: PartitionFilter = None,
        *,
        version: int | None = None,
        timestamp: dt.datetime | int | None = None,
    ) -> int:
        """The logical row count (the count :func:`views.totals` gives): from the log alone on
        collapsing tables; replacing, aggregating and dedup tables read the files a merge has
        not settled yet (docs/concepts.md section 9).

        >>> payments.count(partitions={"day": "2024-01-02"})               # doctest: +SKIP
        """
        return count_rows(self.snapshot(version, timestamp), partitions)

    def to_arrow(
        self,
        *,
        version: int | None = None,
        timestamp: dt.datetime | int | None = None,
        where: str | None = None,
        columns: Sequence[str] | str | None = None,
    ) -> pa.Table:
        """The visible rows (the latest row of every key) as an Arrow table, at the latest
        version, at ``version`` or at ``timestamp``; ``where`` is a SQL predicate over the
        table's columns and ``columns`` the columns to keep. DECIMAL stays exact.

        >>> payments.to_arrow(where="amount > 100", columns=["payment_id"])   # doctest: +SKIP
        """
        return reads.rows(self.snapshot(version, timestamp), where=where, columns=columns)

    def to_pandas(
        self,
        *,
        version: int | None = None,
        timestamp: dt.datetime | int | None = None,
        where: str | None = None,
        columns: Sequence[str] | str | None = None,
    ) -> pd.DataFrame:
        """:meth:`to_arrow` as a pandas DataFrame, in the dtypes DuckDB's ``relation.df()``
        gives except DECIMAL: DECIMAL columns hold Python ``Decimal`` values (object dtype),
        never floats; TIMESTAMPTZ columns are in UTC; DATE columns are ``datetime64[us]``
        (midnights); an integer or BOOLEAN column holding NULL is in pandas' nullable dtype of
        its width (``Int64`` for BIGINT, ``Int32`` for INTEGER, ..., ``boolean``; ``<NA>`` for
        NULL), never float64 (which rounds integers beyond 2**53) or object; one without NULL
        stays numpy's (``int64``, ``int32``, ``bool``).

        >>> payments.to_pandas(version=3)                                     # doctest: +SKIP
        """
        arrow = self.to_arrow(version=version, timestamp=timestamp, where=where, columns=columns)
        return arrow_to_pandas(arrow)

    def to_polars(
        self,
        *,
        version: int | None = None,
        timestamp: dt.datetime | int | None = None,
        where: str | None = None,
        columns: Sequence[str] | str | None = None,
    ) -> pl.DataFrame:
        """:meth:`to_arrow` as a polars DataFrame (needs the ``polars`` extra).

        >>> payments.to_polars(where="account = 'alice'")                    # doctest: +SKIP
        """
        try:
            import polars
        except ImportError as e:
            raise MissingDependencyError(
                "to_polars needs polars: pip install 'ledger-tables[polars]'"
            ) from e
        arrow = self.to_arrow(version=version, timestamp=timestamp, where=where, columns=columns)
        frame = polars.from_arrow(arrow)
        assert isinstance(frame, polars.DataFrame)  # a Table, not a RecordBatch, went in
        return frame

    def partitions(
        self, *, version: int | None = None, timestamp: dt.datetime | int | None = None
    ) -> list[partition_ops.PartitionInfo]:
        """The partitions holding alive files: each one's values, files, entries, logical rows
        (``count(partitions=...)`` of it) and bytes. An unpartitioned table has one partition
        with no values (none when it has no file). Only ``rows`` may read data files, where
        ``count()`` does.

        >>> [(p.values, p.files, p.rows) for p in events.partitions()]       # doctest: +SKIP
        [({'ts_day': '2026-11-21'}, 3, 1200), ({'ts_day': '2026-11-22'}, 1, 40)]
        """
        snap = self.snapshot(version, timestamp)
        return partition_ops.partition_infos(snap.markers(), lambda files: rows_of(snap, files))

    def history(self) -> list[CommitRecord]:
        """Every commit still in the log, oldest first."""
        listing = self.handle.log.listing()
        entries = self.handle.log.read_many([listing.commits[v] for v in sorted(listing.commits)])
        return [_record(e) for e in entries]

    def _version_at(self, timestamp_ms: int) -> int:
        listing = self.handle.log.listing()
        versions = sorted(listing.commits)
        if not versions:
            raise SnapshotNotFoundError(f"table {self.name!r} has no commits to travel to")
        # Commit times strictly increase along the log, so binary search the commit files.
        low, high, found = 0, len(versions) - 1, None
        while low <= high:
            middle = (low + high) // 2
            entry = self.handle.log.read(listing.commits[versions[middle]])
            if entry.timestamp_ms <= timestamp_ms:
                found, low = versions[middle], middle + 1
            else:
                high = middle - 1
        if found is None:
            raise SnapshotNotFoundError(
                f"table {self.name!r} has no commit at or before {_iso(timestamp_ms)} "
                f"({self._oldest_readable(versions)})"
            )
        return found

    def _oldest_readable(self, versions: list[int]) -> str:
        """Where time travel can start, said for a message: the oldest version from which every
        newer one can still be read, and which older ones vacuum made unreadable. The oldest
        listed commit alone would mislead: after vacuum it is often the empty create, while the
        versions after it lost their files."""
        latest = self.handle.latest_state()
        oldest = versions[-1]
        # Downwards from the latest version (always readable), stopping at the first version
        # that lost a file: on an error path, and usually within vacuum's grace of the latest.
        for version in reversed(versions[:-1]):
            state = self.handle.log.load(version)
            if any(m.path not in latest.files for m in state.alive_files):
                # Version 0 is the create, with no data file to lose.
                first = max(versions[0], 1)
                lost = f"versions {first}-{version}" if version > first else f"version {version}"
                return (
                    f"its oldest readable version is {oldest}: {lost} can no longer be read, "
                    "vacuum deleted their data files"
                )
            oldest = version
        return f"its oldest readable commit is version {oldest}"

    # --- writes --------------------------------------------------------------------------------

    def transaction(
        self,
        *,
        app_id: str | None = None,
        batch: int | None = None,
        apps: Mapping[str, int] | None = None,
        evolve_schema: bool = False,
    ) -> Transaction:
        """Group writes under one ``trx_id``; commits on leaving the ``with`` block, aborts on an
        exception. With ``app_id`` and ``batch``, committing a batch already committed for that
        app (or an older one) is a no-op; with ``apps`` (app id -> batch, several at once), the
        commit is a no-op when any of them is."""
        return Transaction(self, app_id=app_id, batch=batch, apps=apps, evolve_schema=evolve_schema)

    def insert(
        self,
        data: Any,
        *,
        app_id: str | None = None,
        batch: int | None = None,
        evolve_schema: bool = False,
    ) -> CommitInfo:
        """Append new rows (the fast path for events): no read, never conflicts."""
        return self._insert_blind(data, app_id, batch, evolve_schema)

    def _insert_blind(
        self,
        data: Any,
        app_id: str | None,
        batch: int | None,
        evolve_schema: bool,
        app_token: str | None = None,
    ) -> CommitInfo:
        """:meth:`insert`; ``app_token`` is recorded with the app batch in the log (the
        buffered writer's way to recognise its own commit of a batch, docs/format.md 5.4)."""
        if _readable_again(data):
            try:
                return self._insert_on_held_state(data, app_id, batch, evolve_schema, app_token)
            except HeldSnapshotOutdatedError:
                # Another writer changed the table's config or schema since this handle's last
                # look: nothing was committed; insert on the latest state, as without the held
                # snapshot.
                pass
        return self._insert(
            data, app_id, batch, evolve_schema, held_snapshot=False, app_token=app_token
        )

    def _insert_on_held_state(
        self,
        data: Any,
        app_id: str | None,
        batch: int | None,
        evolve_schema: bool,
        app_token: str | None,
    ) -> CommitInfo:
        """Insert on the handle's held state, reserving the id ahead of the listing of _trx/
        while that keeps working (docs/format.md 6.1)."""
        if self._reserve_ahead:
            try:
                return self._insert(
                    data,
                    app_id,
                    batch,
                    evolve_schema,
                    held_snapshot=True,
                    reserve_ahead=True,
                    app_token=app_token,
                )
            except ReservedAheadTakenError:
                # Another writer holds the id sent ahead (or one above it): nothing was
                # committed. Reserve after the listing, here and until this handle's ids follow
                # each other again, so writers taking turns do not each pay twice.
                self._reserve_ahead = False
        held_max = self.handle.state.max_trx_id
        info = self._insert(
            data, app_id, batch, evolve_schema, held_snapshot=True, app_token=app_token
        )
        self._reserve_ahead = info.trx_id in (None, held_max + 1)
        return info

    def _insert(
        self,
        data: Any,
        app_id: str | None,
        batch: int | None,
        evolve_schema: bool,
        *,
        held_snapshot: bool,
        reserve_ahead: bool = False,
        app_token: str | None = None,
    ) -> CommitInfo:
        tx = Transaction(
            self,
            app_id=app_id,
            batch=batch,
            evolve_schema=evolve_schema,
            held_snapshot=held_snapshot,
            reserve_ahead=reserve_ahead,
            app_token=app_token,
        )
        try:
            tx.insert(data)
        except (SchemaError, InsertTransformError) as e:
            tx.abort()
            if tx.snapshot_was_held:  # maybe for want of a column or type added since
                raise HeldSnapshotOutdatedError(str(e)) from e
            raise
        except BaseException:
            tx.abort()
            raise
        return tx.commit()

    def check(self, data: Any) -> None:
        """Raise the error a write of ``data`` would raise for rows that do not fit the table
        (a column it lacks, a value of the wrong type or out of range, a missing or NULL key),
        converting them as a write does and writing nothing. A service can check each event
        of a batch alone to say which one is at fault.

        >>> table.check([{"id": 1, "amount": "19.999"}])  # doctest: +SKIP
        Traceback (most recent call last):
        ledger.errors.TypeMismatchError: column 'amount' (DECIMAL(18,2)): text '19.999' ...
        """
        state = self.handle.state
        try:
            self._check(data, state)
        except TypeMismatchError as refused:
            # A list of dicts' or a DataFrame's refusal names its row, as insert's does.
            located = refused_dict_row(data, state.schema, allow_new_columns=False)
            if located is None:
                raise
            raise located from refused

    def _check(self, data: Any, state: TableState) -> None:
        config = state.config
        # A file of columns without rows comes as a chunk of no rows: its columns are checked.
        for chunk in read_rows(data, state.schema, store=self.store, empty_sources=True):
            rows = chunk.table
            if config.insert_transform is not None:
                # As insert shapes them.
                rows = transforms.apply(config.insert_transform, rows, state.schema)
            row_ids = None
            if ROW_ID in rows.column_names:
                if not config.generated_row_id:
                    raise SchemaError("_row_id is a system column; this table has a primary key")
                row_ids = cast_row_ids(rows.column(ROW_ID))
                rows = rows.drop_columns([ROW_ID])
            keys = (
                () if config.generated_row_id or config.rollup is not None else config.key_columns
            )
            conform(rows, state.schema, key_columns=keys, require_all_keys=bool(rows.num_rows))
            if row_ids is not None:
                # As insert checks them: ids the table generated (committed ones end before
                # the next transaction's first).
                refuse_ungenerated_row_ids(row_ids, (state.max_trx_id + 1) << 32)

    def writer(
        self,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_seconds: float | None = DEFAULT_MAX_SECONDS,
        app_id: str | None = None,
    ) -> BufferedWriter:
        """A buffered writer: ``write(row_or_rows)`` from any number of threads, converted at
        once (a bad row raises from its own call) and inserted in one commit per ``max_rows``
        rows, ``max_bytes`` bytes or ``max_seconds`` seconds (None: no age limit), on
        ``flush()``, on ``close()`` or leaving the ``with`` block, and at interpreter exit. With
        ``app_id`` every flush is an idempotent app batch. See ledger.buffered_writer.

        >>> with events.writer(max_seconds=1.0) as w:                    # doctest: +SKIP
        ...     w.write({"event_id": "e-1", "kind": "click"})

        A table with an insert transform takes no buffered writer (its rows are checked against
        the table's columns at ``write()``, before the transform would shape them):
        :class:`~ledger.errors.InvalidArgumentError`.
        """
        if self.handle.latest_state().config.insert_transform is not None:
            raise InvalidArgumentError(
                f"table {self.name!r} has an insert transform: write its rows with insert() "
                "(a buffered writer checks rows against the table's columns before any "
                "transform could shape them)"
            )
        return BufferedWriter(
            self, max_rows=max_rows, max_bytes=max_bytes, max_seconds=max_seconds, app_id=app_id
        )

    def append_entries(
        self, data: Any, *, app_id: str | None = None, batch: int | None = None
    ) -> CommitInfo:
        """Append entries with their own ``dml_type`` (+1 insertion, -1 delete mark)."""
        tx = self.transaction(app_id=app_id, batch=batch)
        try:
            tx.append_entries(data)
        except BaseException:
            tx.abort()
            raise
        return tx.commit()

    def upsert(self, data: Any, *, evolve_schema: bool = False, **kw: Any) -> CommitInfo:
        """Insert new keys, replace existing ones; retried on conflicts."""
        return self._read_modify_write(lambda tx, d: tx.upsert(d), data, evolve_schema, **kw)

    def update(self, data: Any, *, evolve_schema: bool = False, **kw: Any) -> CommitInfo:
        """Replace existing keys (all must exist); retried on conflicts."""
        return self._read_modify_write(lambda tx, d: tx.update(d), data, evolve_schema, **kw)

    def delete(self, keys: Any, **kw: Any) -> CommitInfo:
        """Delete rows by key with delete marks; retried on conflicts."""
        return self._read_modify_write(lambda tx, d: tx.delete(d), keys, False, **kw)

    def delete_where(self, predicate: str, **kw: Any) -> CommitInfo:
        """Delete rows matching a SQL predicate with delete marks; retried on conflicts."""
        return self._read_modify_write(lambda tx, d: tx.delete_where(d), predicate, False, **kw)

    def _read_modify_write(
        self,
        operation: Callable[[Transaction, Any], int],
        data: Any,
        evolve_schema: bool,
        *,
        retries: int = AUTO_RETRIES,
        app_id: str | None = None,
        batch: int | None = None,
    ) -> CommitInfo:
        if isinstance(data, pa.RecordBatchReader):
            data = data.read_all()  # a retry must be able to read the data again
        return self.retrying(
            lambda tx: operation(tx, data),
            evolve_schema=evolve_schema,
            retries=retries,
            app_id=app_id,
            batch=batch,
        )

    def retrying(
        self,
        operation: Callable[[Transaction], Any],
        *,
        evolve_schema: bool = False,
        retries: int = AUTO_RETRIES,
        app_id: str | None = None,
        batch: int | None = None,
        apps: Mapping[str, int] | None = None,
    ) -> CommitInfo:
        """Run ``operation`` in a new transaction and commit it; on a conflict, abort, wait a
        random while and run it again in a fresh transaction (against the newer snapshot), up
        to ``retries`` times. The wait is drawn from zero to twice the failed attempt's time
        (at least 50 ms), doubling after each conflict up to 5 s: writers that collided on one
        key spread apart instead of colliding again in lockstep. What the read-modify-writes
        of every engine commit through.

        >>> table.retrying(lambda tx: tx.upsert([{"id": 1, "n": 2}]))     # doctest: +SKIP
        """
        if not callable(operation):
            raise InvalidArgumentError(
                f"retrying runs a function of the transaction, not {type(operation).__name__}"
            )
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidArgumentError(f"retries must be a whole number >= 0, not {retries!r}")
        for attempt in range(retries + 1):
            started = time.monotonic()
            tx = self.transaction(
                app_id=app_id, batch=batch, apps=apps, evolve_schema=evolve_schema
            )
            try:
                operation(tx)
                return tx.commit()
            except TableDroppedError:
                raise
            except ConflictError:
                tx.abort()
                if attempt == retries:
                    raise
                time.sleep(_backoff_seconds(attempt, time.monotonic() - started))
            except BaseException:
                tx.abort()
                raise
        raise AssertionError("unreachable")

    # --- maintenance ---------------------------------------------------------------------------

    def merge(
        self,
        partitions: PartitionFilter = None,
        *,
        files: list[str] | None = None,
        max_file_size: int | None = None,
        max_files: int | None = None,
        min_files: int = 2,
        order: str = "ascending",
        max_partitions: int | None = None,
        progress: bool | None = None,
    ) -> merging.MergeResult:
        """Compact small files through the table's merge policy; no answer changes.

        Per partition (ascending or descending ``order``; only ``partitions`` if given), up to
        ``max_files`` files smaller than ``max_file_size`` bytes are merged when there are at
        least ``min_files``; ``files`` merges exactly those alive files (paths as
        :meth:`files` gives them, or relative to the table as in ``snapshot().markers()``).
        One commit covers every partition merged. A partition whose files another commit
        changed first is skipped and listed in ``result.conflicts``.

        >>> table.merge(order="descending", max_partitions=3)           # doctest: +SKIP
        """
        if files is not None and (
            isinstance(files, str)
            or not isinstance(files, Sequence)
            or not all(isinstance(f, str) for f in files)
        ):
            raise InvalidArgumentError(f"files must be a list of file paths, not {files!r}")
        if progress is not None:
            arguments.flag(progress, "progress")
        return merging.merge_table(
            self,
            partitions=partitions,
            files=files,
            max_file_size=max_file_size,
            max_files=max_files,
            min_files=min_files,
            order=order,
            max_partitions=max_partitions,
            show_progress=progress,
        )

    def vacuum(
        self, grace: dt.timedelta | float = vacuuming.DEFAULT_GRACE
    ) -> vacuuming.VacuumResult:
        """Delete files tombstoned longer ago than ``grace`` (a timedelta or seconds; by
        default 7 days, as Delta Lake), orphan files, and log files no snapshot newer than
        ``grace`` needs. Versions older than ``grace`` may then no longer be readable; the
        result names the grace period kept.

        >>> table.vacuum()                                              # doctest: +SKIP
        >>> table.vacuum(dt.timedelta(hours=1))                         # doctest: +SKIP
        """
        return vacuuming.vacuum_table(self, grace)

    def create_rollup(
        self,
        name: str,
        by: list[str] | str,
        measures: dict[str, str],
        *,
        auto_refresh: bool = False,
    ) -> Rollup:
        """Create ``name``, an aggregating table that rolls this table up per ``by`` group, and
        fill it. ``measures`` maps output columns to ``count``, ``count(column)`` or
        ``sum(column)`` (a ``row_count`` is added when no measure counts rows). Refresh it with
        ``rollup.refresh()``, or pass ``auto_refresh=True`` to refresh it after every write to
        this table. See ledger.rollup for the exactly-once rule.

        >>> measures = {"views": "count", "secs": "sum(duration)"}
        >>> events.create_rollup("daily", by=["user_id"], measures=measures)  # doctest: +SKIP
        """
        return rollups.create_rollup(self, name, by, measures, auto_refresh=auto_refresh)

    def set_insert_transform(self, sql: str | None) -> int:
        """Set (or with ``None`` remove) the table's insert transform, a SELECT over ``rows`` run
        on the rows of every later insert, upsert and update; checked against the schema first.
        One log commit; returns its version. Transactions already open keep the transform
        their snapshot had.

        >>> t.set_insert_transform("select *, 1::BIGINT as cnt from rows")   # doctest: +SKIP
        """
        return transforms.set_insert_transform(self, sql)

    def drop_partitions(
        self, partitions: PartitionFilter = None, *, where: str | None = None
    ) -> partition_ops.PartitionChange:
        """Remove whole partitions in one log-only commit, by values or by a predicate over
        the partition fields (their values as text).

        >>> table.drop_partitions({"ts_day": ["2026-01-01", "2026-01-02"]})   # doctest: +SKIP
        >>> table.drop_partitions(where="ts_day < '2026-01-01'")            # doctest: +SKIP
        """
        change = partition_ops.drop_partitions(self, partitions, where=where)
        if change.version is not None:
            hooks.run_after_commit(self)
        return change

    def rewrite_partitions(
        self,
        partitions: PartitionFilter = None,
        sql: str | None = None,
        *,
        where: str | None = None,
    ) -> partition_ops.PartitionChange:
        """Pass every file of the chosen partitions through ``sql``, a query over ``entries``
        (the raw entries, system columns included), and commit the results atomically. The
        partitions are chosen as for :meth:`drop_partitions`, by values or by ``where`` (a
        predicate over the partition fields); with neither, every file is passed (a purge
        across the whole table). Files the query leaves as they are stay. The schema cannot
        grow.

        >>> table.rewrite_partitions(None, "SELECT * FROM entries WHERE uid <> 4")  # doctest: +SKIP
        >>> table.rewrite_partitions(sql="SELECT * FROM entries WHERE uid <> 4",
        ...                          where="ts_day >= '2026-01-01'")             # doctest: +SKIP
        """
        change = partition_ops.rewrite_partitions(self, partitions, sql, where=where)
        if change.version is not None:
            hooks.run_after_commit(self)
        return change

    # --- resources -----------------------------------------------------------------------------

    def close(self) -> None:
        """Let go of the DuckDB database reads of this table (and the other tables of its
        warehouse) run on: reads running in other threads and relations views returned still
        finish on it, and it is freed when the last is gone; a later read opens a new one.

        >>> with wh.table("accounts") as accounts:                            # doctest: +SKIP
        ...     views.totals(accounts).fetchall()
        """
        release_read_sessions(self.store)

    def __enter__(self) -> Table:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _backoff_seconds(attempt: int, attempt_seconds: float) -> float:
    """Full-jitter exponential backoff, uniform in [0, min(cap, unit * 2**(attempt + 1))]. The
    unit is the time the failed attempt took (at least the base): writers only stop colliding
    when their attempts, not just their starts, are spread apart."""
    unit = max(RETRY_BACKOFF_BASE_S, attempt_seconds)
    return random.uniform(0, min(RETRY_BACKOFF_CAP_S, unit * 2 ** (attempt + 1)))


def _record(entry: LogFile) -> CommitRecord:
    apps = dict(entry.apps or {})
    if entry.app is not None:
        apps[entry.app.app_id] = entry.app.batch
    return CommitRecord(
        version=entry.version,
        timestamp=dt.datetime.fromtimestamp(entry.timestamp_ms / 1000, tz=dt.UTC),
        operation=entry.operation,
        trx_id=entry.trx_id,
        files_added=sum(1 for m in entry.files if m.alive),
        files_removed=sum(1 for m in entry.files if not m.alive),
        inserted=int(entry.info.get("inserted", 0)),
        deleted=_rows_deleted(entry),
        app_id=next(iter(apps)) if len(apps) == 1 else None,
        batch=next(iter(apps.values())) if len(apps) == 1 else None,
        entries_removed=int(entry.info.get("entries_removed", 0)),
        apps=apps,
    )


def _rows_deleted(entry: LogFile) -> int | None:
    """The rows a commit deleted; None where its log entry does not know them (a partition drop
    whose rows only the data knows records only the entries it removed)."""
    if "deleted" in entry.info:
        return int(entry.info["deleted"])
    return None if entry.operation == partition_ops.DROP_PARTITIONS else 0


def _iso(timestamp_ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time, the way messages show times."""
    moment = dt.datetime.fromtimestamp(timestamp_ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds")


def _readable_again(data: Any) -> bool:
    """Whether ``data`` can be read a second time (an insert on a held snapshot may have to be
    done again on the latest state): everything but one-pass streams (readers, iterators)."""
    return not isinstance(data, pa.RecordBatchReader | Iterator)


def arrow_to_pandas(arrow: pa.Table) -> pd.DataFrame:
    """``arrow`` as a pandas DataFrame in the dtypes DuckDB's ``relation.df()`` gives, except
    DECIMAL: an integer or BOOLEAN column holding NULL in pandas' nullable dtype of its width
    (``Int64``, ``Int32``, ``boolean``...) rather than float64, whose 53 bits would round big
    integers, or object; one without NULL in numpy's (``int64``, ``int32``, ``bool``); DATE as
    ``datetime64[us]`` (midnights, which write back into a DATE column); DECIMAL as Python
    ``Decimal`` values (object), never floats.

    >>> arrow_to_pandas(pa.table({"n": pa.array([2**53 + 1, None])}))["n"].tolist()
    [9007199254740993, <NA>]
    """
    import pandas

    nullable: dict[pa.DataType, Any] = {
        pa.bool_(): pandas.BooleanDtype(),
        pa.int8(): pandas.Int8Dtype(),
        pa.int16(): pandas.Int16Dtype(),
        pa.int32(): pandas.Int32Dtype(),
        pa.int64(): pandas.Int64Dtype(),
        pa.uint8(): pandas.UInt8Dtype(),
        pa.uint16(): pandas.UInt16Dtype(),
        pa.uint32(): pandas.UInt32Dtype(),
        pa.uint64(): pandas.UInt64Dtype(),
    }
    arrow = pa.table([_dates_as_timestamps(c) for c in arrow.columns], names=arrow.column_names)
    frame = arrow.to_pandas()
    for index, column in enumerate(arrow.columns):
        if column.type in nullable and column.null_count:
            converted = column.to_pandas(types_mapper=nullable.get)
            frame.isetitem(index, converted.set_axis(frame.index))
    return frame


def _dates_as_timestamps(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A DATE column as midnights in microseconds (``datetime64[us]`` in pandas, as DuckDB's
    ``relation.df()`` gives it); one holding a date beyond that type's years (about 294,000)
    stays dates (Python ``date`` objects)."""
    if not pa.types.is_date(column.type):
        return column
    try:
        return column.cast(pa.timestamp("us"))
    except (pa.ArrowInvalid, OverflowError):
        return column
