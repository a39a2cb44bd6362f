"""Transactions: one ``trx_id``, any mix of writes, committed atomically as one log entry.

>>> with table.transaction() as tx:                      # doctest: +SKIP
...     tx.update([{"account": "A-1", "amount": 90}])
...     tx.insert([{"account": "B-7", "amount": 15}])

Every operation writes its entries straight to data files (invisible until commit). An update
reads the key's live entries at the transaction's snapshot (plus the transaction's own writes),
writes a delete mark carrying each old value, then an insertion of the new one. At commit the
transaction checks that no commit since its snapshot wrote entries for the keys it read (or rows
matching the predicates it deleted by); if one did, nothing is committed and
:class:`~ledger.errors.ConflictError` is raised. Blind inserts never conflict.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ledger import arguments, hooks
from ledger import insert_transform as transforms
from ledger.engines.duckdb import rmw
from ledger.engines.duckdb.errors import QUERY_ERRORS, RUNNING_ERRORS, engine_reason
from ledger.engines.duckdb.key_scan import distinct_integer_keys
from ledger.engines.duckdb.query import check_condition
from ledger.errors import (
    ConflictError,
    DuplicateKeyError,
    InvalidArgumentError,
    InvalidPredicateError,
    KeyNotFoundError,
    MissingKeyError,
    SchemaError,
    StaleVersionError,
    TransactionClosedError,
    TransactionTimeoutError,
    TypeMismatchError,
    UnmatchedDeleteMarkError,
)
from ledger.inputs import (
    Rows,
    concat_rows,
    empty_key_field,
    is_rows_source,
    read_rows,
    refused_dict_row,
)
from ledger.log.commit import next_timestamp
from ledger.log.entries import AppBatch, FileMarker, LogFile, TableConfig
from ledger.log.handle import is_recent
from ledger.log.state import TableState
from ledger.partitioning import PartitionSpec
from ledger.pruning import prune_by_keys
from ledger.schema import (
    DML_TYPE,
    ROW_ID,
    TRX_ID,
    TRX_SEQ,
    TableSchema,
    conform,
    renumbered_refusal,
)
from ledger.sql import ident
from ledger.sql.names import EXCESS
from ledger.sql.predicates import predicate_over
from ledger.trx_ids import (
    SpeculativeReservation,
    reservation_body,
    reservation_key,
    reserve_trx_id,
)
from ledger.writer import (
    DataWriter,
    build_entries,
    file_schema,
    row_ids,
    sequence,
    start_request,
)
from merge_policies import load_policy
from merge_policies.base import LATEST_VERSION, MergePolicy

if TYPE_CHECKING:
    from ledger.table import Table

log = logging.getLogger(__name__)

# Operations that rewrite entries without changing what they mean (merges); they
# never conflict with a read-modify-write.
MEANING_PRESERVING = frozenset({"merge"})
# Operations that remove entries without cancelling them (a dropped or purged partition): a
# read-modify-write that read those partitions would cancel entries that are gone.
PARTITION_REMOVING = frozenset({"drop_partitions", "rewrite_partitions"})
STREAM_CHUNK_ROWS = 1 << 20
_MAX_ROWS_PER_TRX = 1 << 32
_MAX_ENTRIES_PER_TRX = (1 << 31) - 1  # trx_seq is an INTEGER


class HeldSnapshotOutdatedError(ConflictError):
    """A transaction begun on the handle's held state (``held_snapshot=True``) may have missed
    a commit made before it began: another writer changed the table's config or schema since
    that state, its rows did not fit the held schema, or a commit since carries its id.
    Nothing was committed, and the caller (:meth:`Table.insert`) runs the write again on the
    latest state. Never reaches users."""


class ReservedAheadTakenError(HeldSnapshotOutdatedError):
    """The id a transaction reserved ahead of its listing of ``_trx/`` (``reserve_ahead=True``)
    was taken, or another reservation is above it. Nothing was committed, and the caller
    (:meth:`Table.insert`) runs the write again on the held state, reserving after the listing.
    Never reaches users."""


@dataclass(frozen=True)
class CommitInfo:
    """What a commit did. ``version`` and ``trx_id`` are None when nothing was committed (an
    empty transaction, or an (app_id, batch) that was already committed): no row carries the
    id the transaction held, and it may be given to a later transaction."""

    version: int | None
    trx_id: int | None
    inserted: int
    deleted: int


class Transaction:
    """A group of writes under one ``trx_id``; use ``table.transaction()`` to make one."""

    def __init__(
        self,
        table: Table,
        *,
        app_id: str | None = None,
        batch: int | None = None,
        apps: Mapping[str, int] | None = None,
        evolve_schema: bool = False,
        follows_batch: int | None = None,
        commit_empty: bool = False,
        held_snapshot: bool = False,
        reserve_ahead: bool = False,
        app_token: str | None = None,
    ) -> None:
        if (app_id is None) != (batch is None):
            raise InvalidArgumentError("pass app_id and batch together (or neither)")
        if batch is not None:
            batch = arguments.whole_number(batch, "batch")
        if app_id is not None and (not isinstance(app_id, str) or not app_id):
            raise InvalidArgumentError(f"app_id must be non-empty text, not {app_id!r}")
        tokens = _app_batches(apps)
        if tokens and app_id is not None:
            raise InvalidArgumentError("pass app_id and batch, or apps, not both")
        arguments.flag(evolve_schema, "evolve_schema")
        self._table = table
        self._started_ms = int(time.time() * 1000)  # before the snapshot: see check_timeout
        # The id is reserved before the snapshot is read, and the reservation names a version at
        # or below it: a vacuum that lists reservations after reading its state either sees this
        # transaction or read that state before this snapshot, so it keeps every file this
        # transaction may read or check for conflicts (ledger.maintenance.vacuum).
        #
        # With ``held_snapshot`` (blind inserts), a state the handle confirmed recently is the
        # snapshot, without listing the log; with ``reserve_ahead`` too, on an object store the
        # id is reserved at the same time as the listing: see _reserve_and_read.
        self._trx_id, self._base, self._held_since, self._speculation = _reserve_and_read(
            table, held_snapshot, reserve_ahead
        )
        # Whether the reservation of _trx_id is this transaction's (a speculative one is known
        # only once settled): only then is it given back when nothing commits.
        self._reservation_held = True
        self._schema = self._base.schema
        self._config = self._base.config
        self._evolve = evolve_schema
        self._app = None if app_id is None else AppBatch(str(app_id), int(batch or 0), app_token)
        # Every app batch the commit carries (one, or several: one per file of a load); it is
        # written only while none of them is committed (docs/format.md 5.4).
        self._tokens = {self._app.app_id: self._app.batch} if self._app is not None else tokens
        # Commit only if the app's last committed batch is this one (-1: none yet): how a rollup
        # refresh commits its watermark exactly once (see ledger.rollup).
        self._follows = follows_batch
        self._commit_empty = commit_empty
        self._replay = _any_committed(self._tokens, self._base)
        self._next_seq = 0
        self._next_row = 0
        self._added: list[FileMarker] = []
        self._touched: list[pa.Table] = []
        self._predicates: list[str] = []
        # Commits after the snapshot already found not to conflict: a retried commit (after
        # losing the race to an append) checks only the commits that landed since.
        self._checked_through = self._base.version
        self._read_partitions: set[tuple[tuple[str, str | None], ...]] = set()
        self._operations: list[str] = []
        self._inserted = 0
        self._deleted = 0
        self._closed = False
        self.commit_info: CommitInfo | None = None

    # --- context manager -----------------------------------------------------------------------

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    # --- properties ----------------------------------------------------------------------------

    @property
    def snapshot_version(self) -> int:
        """The version this transaction reads."""
        return self._base.version

    @property
    def snapshot_was_held(self) -> bool:
        """Whether the snapshot is the handle's held state rather than one read on begin."""
        return self._held_since is not None

    @property
    def trx_id(self) -> int:
        """The transaction's ``trx_id`` (reserved when it began)."""
        return self._trx_id

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._config.key_columns

    @property
    def _value_columns(self) -> list[str]:
        extra = [ROW_ID] if self._config.generated_row_id else []
        return [*self._schema.names, *extra]

    # --- writes --------------------------------------------------------------------------------

    def insert(self, data: Any) -> int:
        """Append new rows blindly (no read, never conflicts); return the number of rows.

        ``data`` is any source :mod:`ledger.inputs` accepts (a list of dicts, Arrow, pandas,
        polars, a DuckDB relation, Parquet/CSV/JSON files); streams and files are written in
        bounded chunks.
        """
        if self._begin("insert"):
            return 0
        with self._naming_dict_rows(data):
            return self._insert(data)

    def _insert(self, data: Any) -> int:
        total = 0
        with self._empty_keys_located(data):
            total = self._insert_chunks(data)
        self._inserted += total
        return total

    def _insert_chunks(self, data: Any) -> int:
        total = rows_before = 0
        for chunk in self._chunks(data, check_empty=self._check_columns):
            with _rows_named_in_whole_input(rows_before):
                total += self._insert_chunk(chunk)
            rows_before += chunk.num_rows
        return total

    def _insert_chunk(self, chunk: Rows) -> int:
        shaped = self._transformed(chunk.table)
        if not shaped.num_rows:
            return 0  # the transform's WHERE kept none of them
        # A rollup's key is its group: rows with NULL in a by column are one group, as in SQL's
        # GROUP BY (its reads and merges group by the key, NULLs together).
        rows = self._conform(shaped, require_keys=True, null_keys=self._config.rollup is not None)
        if ROW_ID in rows.column_names:
            self._refuse_ungenerated_row_ids(rows.column(ROW_ID))
        return self._write(self._entries(rows, 1))

    @contextlib.contextmanager
    def _empty_keys_located(self, data: Any) -> Iterator[None]:
        """A NULL key read from a CSV file is named by its file and row, as the file's other
        refusals are (found by reading the key columns again, only once refused)."""
        try:
            yield
        except MissingKeyError as e:
            where = empty_key_field(data, self.key_columns, self._table.store)
            if where is None:
                raise
            raise MissingKeyError(
                f"{where}; every row needs a complete key. Nothing was written"
            ) from e

    def _refuse_ungenerated_row_ids(self, ids: pa.ChunkedArray) -> None:
        """A ``_row_id`` given with an insertion must be one the table already generated (an
        earlier transaction's, or one this transaction made): ids from here on are this and
        later transactions' to generate, and a given one would collide with them."""
        refuse_ungenerated_row_ids(ids, (self.trx_id << 32) + self._next_row)

    def append_entries(self, data: Any) -> int:
        """Append entries that carry their own ``dml_type`` (+1 or -1): the caller writes its own
        opposite entries (a delete mark must carry the values of the entry it cancels)."""
        if self._begin("append_entries"):
            return 0
        with self._naming_dict_rows(data):
            return self._append_entries(data)

    def _append_entries(self, data: Any) -> int:
        total = rows_before = 0
        for given in self._chunks(data, check_empty=self._check_entry_columns):
            with _rows_named_in_whole_input(rows_before):
                total += self._append_entry_chunk(given.table)
            rows_before += given.num_rows
        return total

    def _append_entry_chunk(self, chunk: pa.Table) -> int:
        if DML_TYPE not in chunk.column_names:
            raise SchemaError("append_entries needs a dml_type column (+1 insert, -1 mark)")
        signs = chunk.column(DML_TYPE)
        _refuse_non_numeric_signs(signs.type)
        if signs.null_count or not pc.all(pc.is_in(signs, pa.array([1, -1], signs.type))).as_py():
            raise TypeMismatchError("dml_type must be +1 or -1 in every row, never NULL")
        signs = signs.cast(pa.int8())
        marks = pc.equal(signs, -1)
        missing_row_ids = self._config.generated_row_id and ROW_ID not in chunk.column_names
        if missing_row_ids and pc.any(marks).as_py():
            raise MissingKeyError(
                "delete marks on a table without a primary key must carry the _row_id "
                "of the entry they cancel"
            )
        self.refuse_marks_if_insert_only(int(pc.sum(marks).as_py() or 0))
        if self._config.generated_row_id and not missing_row_ids:
            chunk = self._fill_row_ids_of_insertions(chunk, marks)
        rows = self._conform(chunk.drop_columns([DML_TYPE]), require_keys=True)
        if ROW_ID in rows.column_names:
            self._refuse_ungenerated_row_ids(
                rows.column(ROW_ID).filter(pc.invert(marks))  # insertions' ids
            )
        self.check_delete_marks(rows.append_column(DML_TYPE, signs))
        entries = self._entries(rows, 1)
        entries = entries.set_column(entries.schema.get_field_index(DML_TYPE), DML_TYPE, signs)
        written = self._write(entries)
        # Insertions are blind, but a delete mark cancels an entry another writer may be
        # cancelling too: its key counts as read, so that race conflicts instead of
        # cancelling one entry twice.
        self._touched.append(self._keys_of(entries.filter(marks)))
        deleted = int(pc.sum(marks).as_py() or 0)
        self._deleted += deleted
        self._inserted += entries.num_rows - deleted
        return written

    def _fill_row_ids_of_insertions(self, chunk: pa.Table, marks: pa.ChunkedArray) -> pa.Table:
        """Insertions given with a NULL ``_row_id`` (next to marks that carry theirs) get new
        ids; a mark must say which entry it cancels."""
        ids = chunk.column(ROW_ID)
        if not ids.null_count:
            return chunk
        missing = pc.is_null(ids).combine_chunks()
        if pc.any(pc.and_(missing, marks.combine_chunks())).as_py():
            raise MissingKeyError(
                "delete marks on a table without a primary key must carry the _row_id of the "
                "entry they cancel"
            )
        filled = pc.replace_with_mask(
            cast_row_ids(ids.fill_null(0)).combine_chunks(),
            missing,
            self._new_row_ids(ids.null_count),
        )
        return chunk.set_column(chunk.schema.get_field_index(ROW_ID), ROW_ID, filled)

    def upsert(self, data: Any) -> int:
        """Insert rows whose key is new; replace the visible row of keys that exist.

        Columns missing from ``data`` keep their current value (NULL for new keys); in a list
        of dicts that is decided row by row (a key absent from a dict keeps that row's value, an
        explicit None sets NULL). Returns the number of rows written.
        """
        if self._begin("upsert"):
            return 0
        self._require_primary_key("upsert")
        keyed = self._keyed_rows(data)
        if keyed is None:
            return 0
        latest, marks = self._read_live(keys=keyed.table.select(list(self.key_columns)))
        return self._replace(keyed, latest, marks)

    def update(self, data: Any) -> int:
        """Replace the visible row of existing keys; columns missing from ``data`` (or from one
        dict of a list) keep their values. Every key must exist (else :class:`KeyNotFoundError`,
        nothing written)."""
        if self._begin("update"):
            return 0
        keyed = self._keyed_rows(data)
        if keyed is None:
            return 0
        keys = keyed.table.select(list(self.key_columns))
        latest, marks = self._read_live(keys=keys)
        # ``latest`` holds one row per key found, every one a key of ``keys`` (whose keys are
        # distinct): as many rows as keys means none is missing, without a join.
        missing = (
            keys.schema.empty_table()
            if latest.num_rows == keys.num_rows
            else rmw.anti_join(keys, latest, self.key_columns)
        )
        if missing.num_rows:
            raise KeyNotFoundError(
                f"update of {missing.num_rows} key(s) with no visible row, e.g. "
                f"{missing.slice(0, 3).to_pylist()}; use upsert to insert new keys"
            )
        return self._replace(keyed, latest, marks)

    def delete(self, keys: Any) -> int:
        """Delete the rows of the given keys by writing delete marks; return how many rows
        were deleted (keys without a visible row are ignored).

        ``keys`` may be rows with the key columns (any accepted data form), or for a
        single-column key a list of values or one array of them (a pandas Series, Index or
        ExtensionArray, a numpy array, an Arrow array):
        ``tx.delete(frame.loc[frame.amount < 0, "id"])``.
        """
        if self._begin("delete"):
            return 0
        key_table = self._key_table(keys)
        if key_table.num_rows == 0:
            return 0
        _, marks = self._read_live(keys=key_table)
        return self._mark(marks, key_table)

    def delete_where(self, predicate: str) -> int:
        """Delete every row matching a SQL predicate over the table's columns (DuckDB syntax),
        e.g. ``"amount < 0 AND region = 'EU'"``; return how many rows were deleted."""
        if self._begin("delete_where"):
            return 0
        given = predicate
        tree = predicate_over(self._schema.names, predicate, "delete_where")
        predicate = str(tree.sql(dialect="duckdb"))
        check_condition(self._schema.arrow(), predicate, shown=given)
        _, marks = self._read_live(keys=None, predicate=predicate, shown=given)
        self._predicates.append(predicate)
        return self._mark(marks, marks)

    def lookup(self, keys: Any) -> pa.Table:
        """The visible rows of ``keys`` as this transaction sees them (its snapshot plus its own
        writes). The keys count as read: if another commit writes them before this transaction
        commits, the commit raises :class:`ConflictError` (so read-then-update never loses an
        update)."""
        self._ensure_open()
        key_table = self._key_table(keys)
        latest, _ = self._read_live(keys=key_table)
        self._touched.append(key_table)
        return latest

    # --- commit / abort ------------------------------------------------------------------------

    def commit(self) -> CommitInfo:
        """Commit every write atomically; raise :class:`ConflictError` if another commit since
        the snapshot invalidated a read, leaving nothing committed."""
        self.commit_info = self._commit()
        if self.commit_info.version is not None:
            hooks.run_after_commit(self._table)
        return self.commit_info

    def _commit(self) -> CommitInfo:
        self._ensure_open()
        self._closed = True
        try:
            reserved = self._settle_speculation()
        except BaseException:
            self._discard_files()
            raise
        if not reserved:
            self._discard_files()
            raise ReservedAheadTakenError(
                f"table {self._table.name!r}: trx_id {self.trx_id} was reserved by another "
                "transaction, or another reservation is above it; nothing was committed. Retry"
            )
        schema_changed = self._schema != self._base.schema
        if self._replay or (not self._added and not schema_changed and not self._commit_empty):
            self._discard_files()
            return CommitInfo(None, None, 0, 0)
        operation = self._operations[0] if len(set(self._operations)) == 1 else "transaction"

        def build(latest: TableState) -> LogFile | None:
            if _any_committed(self._tokens, latest):
                return None
            if self._app is not None and self._follows is not None:
                last = latest.apps.get(self._app.app_id, -1)
                if last != self._follows:
                    raise ConflictError(
                        f"table {self._table.name!r}: {self._app.app_id!r} committed batch "
                        f"{last} since this transaction expected {self._follows}; retry"
                    )
            check_timeout(latest, self._started_ms, self._table.name)
            self._refuse_outdated_held_snapshot(latest)
            schema = latest.schema
            if schema_changed or schema != self._base.schema:
                try:
                    schema = latest.schema.evolve(self._schema.arrow())
                except SchemaError as e:
                    raise ConflictError(
                        f"table {self._table.name!r}: a concurrent schema change conflicts with "
                        f"this transaction's: {e}"
                    ) from e
            return LogFile(
                version=latest.version + 1,
                timestamp_ms=next_timestamp(latest),
                operation=operation,
                schema=schema,
                files=tuple(self._added),
                trx_id=self.trx_id,
                app=self._app,
                apps=None if self._app is not None else self._tokens or None,
                info={"inserted": self._inserted, "deleted": self._deleted},
            )

        base: TableState | None = self._base
        if self._held_since is not None and not is_recent(self._base, self._held_since):
            base = None  # held too long to aim at the next version unseen: read the log first
        try:
            _, entry = self._table.handle.commit(build, base, self._check_conflicts)
        except ConflictError:
            self._discard_files()  # certainly not committed: no one will ever reference them
            raise
        if entry is None:
            self._discard_files()
            return CommitInfo(None, None, 0, 0)
        return CommitInfo(entry.version, entry.trx_id, self._inserted, self._deleted)

    def _refuse_outdated_held_snapshot(self, latest: TableState) -> None:
        """A held snapshot may predate a config or schema change committed before this
        transaction began (which a snapshot read on begin would have seen): then its rows may
        be shaped by an outdated insert transform, partitioning or schema, so nothing is
        committed and :meth:`Table.insert` writes them again on the latest state."""
        if self._held_since is None:
            return
        if latest.config != self._base.config or latest.schema != self._base.schema:
            raise HeldSnapshotOutdatedError(
                f"table {self._table.name!r} changed its config or schema since this "
                "transaction's held snapshot; nothing was committed. Retry on the latest state"
            )

    def abort(self) -> None:
        """Discard the transaction. Its data files are never referenced by the log; they are
        deleted now if possible (otherwise vacuum collects them as orphans)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._settle_speculation()
        except Exception as e:  # the error being handled matters more; nothing was reserved
            log.warning(
                "table %s: reserving trx_id %d failed: %s", self._table.name, self._trx_id, e
            )
        self._discard_files()

    def _settle_speculation(self) -> bool:
        """Wait for a speculative reservation of the id (see ``_reserve_and_read``); return
        whether the id is this transaction's. Raises what its requests raised (the id is not
        held then)."""
        speculation, self._speculation = self._speculation, None
        if speculation is None:
            return self._reservation_held
        self._reservation_held = False
        self._reservation_held = speculation.confirmed()
        return self._reservation_held

    # --- internals: input ----------------------------------------------------------------------

    def _begin(self, operation: str) -> bool:
        """Start an operation; True means skip it (the app batch was already committed)."""
        self._ensure_open()
        self._refuse_writes_to_a_rollup(operation)
        self._operations.append(operation)
        return self._replay

    def _refuse_writes_to_a_rollup(self, operation: str) -> None:
        """A rollup holds the totals of its base: only its refreshes write to it (a
        transaction carrying the rollup's own app id and the watermark it follows). A row
        written by hand would stay in every later answer, since refreshes only add changes."""
        rollup = self._config.rollup
        if rollup is None:
            return
        refresh_id = f"rollup:{rollup.get('base_uuid')}"
        if self._app is not None and self._app.app_id == refresh_id and self._follows is not None:
            return
        raise InvalidArgumentError(
            f"table {self._table.name!r} is a rollup of {rollup.get('base')!r}: only its "
            f"refreshes write to it, so {operation} is refused and nothing was written. Write "
            f"to {rollup.get('base')!r} instead, then refresh the rollup (or let auto_refresh "
            "do it)"
        )

    def _ensure_open(self) -> None:
        if self._closed:
            raise TransactionClosedError(
                "this transaction was already committed or aborted; start a new one"
            )

    def _require_primary_key(self, operation: str) -> None:
        if self._config.generated_row_id:
            raise InvalidArgumentError(
                f"{operation} needs a primary key and table {self._table.name!r} has none; use "
                "insert for new rows, or update/delete by _row_id"
            )

    @contextlib.contextmanager
    def _naming_dict_rows(self, data: Any) -> Iterator[None]:
        """A refused value of a list of dicts or a pandas DataFrame named by its row (its index
        in the list, its position in the frame), as a refused line of a file is; looked for
        only once the conversion has refused."""
        try:
            yield
        except TypeMismatchError as refused:
            located = refused_dict_row(data, self._schema, allow_new_columns=self._evolve)
            if located is None:
                raise
            raise located from refused

    def _chunks(
        self,
        data: Any,
        *,
        row_presence: bool = False,
        check_empty: Callable[[pa.Table], object] | None = None,
    ) -> Iterator[Rows]:
        """User data as Arrow tables of bounded size (streams and files stay streams); with
        ``row_presence``, JSON lines say line by line which columns they give. A source holding
        columns and no rows (a CSV of a header alone, an empty DataFrame) is given to
        ``check_empty`` and not yielded, or yielded as a chunk of no rows without
        ``check_empty``."""
        for rows in read_rows(
            data,
            self._schema,
            store=self._table.store,
            chunk_rows=STREAM_CHUNK_ROWS,
            in_memory_chunk_rows=STREAM_CHUNK_ROWS * 4,
            row_presence=row_presence,
            empty_sources=True,
        ):
            if rows.num_rows or check_empty is None:
                yield rows
            else:
                check_empty(rows.table)

    def _check_columns(self, table: pa.Table) -> None:
        """The columns of a file without rows checked as those of its rows would be (a column
        the table lacks is refused), without requiring the key: it writes nothing."""
        self._conform(self._transformed(table), require_keys=False)

    def _conform(self, table: pa.Table, *, require_keys: bool, null_keys: bool = False) -> pa.Table:
        row_ids = None
        if ROW_ID in table.column_names:
            if not self._config.generated_row_id:
                raise SchemaError("_row_id is a system column; this table has a primary key")
            row_ids = cast_row_ids(table.column(ROW_ID))
            table = table.drop_columns([ROW_ID])
        keys = () if self._config.generated_row_id or null_keys else self.key_columns
        rows, schema = conform(
            table,
            self._schema,
            key_columns=keys,
            allow_new_columns=self._evolve,
            require_all_keys=require_keys,
        )
        if schema != self._schema:
            self._schema = self._policy_accepts(schema)
        if row_ids is not None:
            rows = rows.append_column(ROW_ID, row_ids)
        return rows

    def _check_keyed_columns(self, table: pa.Table) -> None:
        """As :meth:`_check_columns` for an upsert or update, which also refuses a source
        without the key columns (or ``_row_id``, in a table without a primary key), rows or
        none."""
        if self._config.generated_row_id and ROW_ID not in table.column_names:
            raise MissingKeyError("rows of a table without a primary key are addressed by _row_id")
        self._conform(self._transformed(table), require_keys=True)

    def _check_entry_columns(self, table: pa.Table) -> None:
        """As :meth:`_check_columns`, for entries, which carry their own ``dml_type``."""
        if DML_TYPE in table.column_names:
            table = table.drop_columns([DML_TYPE])
        self._conform(table, require_keys=False)

    def _transformed(self, table: pa.Table) -> pa.Table:
        """The rows as the table's insert transform shapes them (as given without one)."""
        if self._config.insert_transform is None:
            return table
        return transforms.apply(self._config.insert_transform, table, self._schema)

    def _keyed_rows(self, data: Any) -> Rows | None:
        """The rows of a keyed operation, checked, with which rows named which columns; None
        when there are none."""
        # A partial row keeps the values it does not give: only these operations read them.
        with self._naming_dict_rows(data), self._empty_keys_located(data):
            return self._checked_keyed_rows(data)

    def _checked_keyed_rows(self, data: Any) -> Rows | None:
        chunks = list(self._chunks(data, row_presence=True, check_empty=self._check_keyed_columns))
        if not chunks:
            return None
        given = concat_rows(chunks, self._schema)
        if self._config.insert_transform is not None:
            given = transforms.apply_over_current(
                self._config.insert_transform,
                given,
                self._value_columns,
                self._current_values,
                self._schema,
            )
            if not given.num_rows:
                return None
        rows = self._conform(given.table, require_keys=True)
        if self._config.generated_row_id and (
            ROW_ID not in rows.column_names or rows.column(ROW_ID).null_count
        ):
            raise MissingKeyError("rows of a table without a primary key are addressed by _row_id")
        _check_unique(rows, self.key_columns)
        return Rows(rows, {c: m for c, m in given.given.items() if c in rows.column_names})

    def _current_values(self, rows: pa.Table) -> tuple[pa.Table, pa.Array]:
        """The value columns of the visible row of each row's key (NULL for a new key) and
        whether the key has one, row for row: what a partial row is overlaid on before the
        insert transform runs."""
        keys = self._conform(rows, require_keys=True).select(list(self.key_columns))
        _check_unique(keys, self.key_columns)
        latest, _ = self._read_live(keys=keys)
        found = transforms.unused_name("key_found", latest.column_names)
        latest = latest.append_column(found, pa.array([True] * latest.num_rows, pa.bool_()))
        current = rmw.fill_missing(keys, latest, self.key_columns, [*self._value_columns, found])
        return current.drop_columns([found]), current.column(found).combine_chunks()

    def _key_table(self, keys: Any) -> pa.Table:
        key_columns = list(self.key_columns)
        keys = _key_values(keys, key_columns)
        _check_key_form(keys, key_columns)
        if isinstance(keys, list) and keys and not isinstance(keys[0], dict):
            if len(key_columns) == 1 and not isinstance(keys[0], tuple | list):
                keys = [{key_columns[0]: k} for k in keys]
            else:
                keys = [
                    dict(zip(key_columns, _key_tuple(k, key_columns), strict=True)) for k in keys
                ]
        chunks = list(self._chunks(keys)) if keys is not None else []
        table = concat_rows(chunks, self._schema).table if chunks else None
        if table is None:
            return pa.table({k: pa.array([], self._key_type(k)) for k in key_columns})
        missing = [k for k in key_columns if k not in table.column_names]
        if missing:
            raise MissingKeyError(f"keys must give every key column; missing {missing}")
        table = table.select(key_columns)
        if self._config.generated_row_id:
            return pa.table({ROW_ID: cast_row_ids(table.column(ROW_ID))})
        rows, _ = conform(table, self._schema, key_columns=key_columns)
        return rows

    def _keys_of(self, rows: pa.Table) -> pa.Table:
        """The key columns of ``rows``, in the table's key types (engines may hand back other
        representations, e.g. a time zone other than UTC)."""
        key_columns = list(self.key_columns)
        return rows.select(key_columns).cast(
            pa.schema([pa.field(c, self._key_type(c)) for c in key_columns])
        )

    def _key_type(self, column: str) -> pa.DataType:
        return pa.int64() if column == ROW_ID else self._schema.type_of(column)

    # --- internals: entries and files ----------------------------------------------------------

    def _entries(self, rows: pa.Table, dml_type: int) -> pa.Table:
        """Rows -> entries in the file schema: missing columns NULL, system columns filled.

        ``trx_seq`` numbers entries in the order they were made: operation after operation, and
        rows of one operation in input order, so two rows of one batch for the same key still
        have a defined latest one.
        """
        n = rows.num_rows
        seq = self.claim_entries(n)
        return build_entries(
            rows,
            file_schema(self._schema, self._config),
            trx_id=self.trx_id,
            trx_seq=sequence(seq, n),
            dml_type=dml_type,
            new_row_ids=self._new_row_ids,
        )

    def _new_row_ids(self, n: int) -> pa.Array:
        return row_ids(self.trx_id, self.claim_row_ids(n), n)

    # --- hooks for engines that write their own files (ledger.spark) ---------------------------

    def claim_entries(self, n: int) -> int:
        """Reserve ``n`` consecutive ``trx_seq`` numbers; return the first."""
        seq = self._next_seq
        if seq + n >= _MAX_ENTRIES_PER_TRX:
            raise InvalidArgumentError(
                f"a transaction can write at most {_MAX_ENTRIES_PER_TRX} entries; split it"
            )
        self._next_seq += n
        return seq

    def claim_row_ids(self, n: int) -> int:
        """Reserve ``n`` generated ``_row_id`` numbers (their low 32 bits); return the first."""
        start = self._next_row
        if start + n >= _MAX_ROWS_PER_TRX:
            raise InvalidArgumentError("a transaction can insert at most 2^32 rows")
        self._next_row += n
        return start

    def add_written_files(
        self,
        markers: Sequence[FileMarker],
        *,
        inserted: int,
        deleted: int,
        touched_keys: pa.Table | None = None,
        read_files: Sequence[FileMarker] = (),
    ) -> None:
        """Adopt data files an engine wrote for this transaction (committed with it, deleted if
        it aborts). ``touched_keys`` are keys read or cancelled (checked for conflicts at
        commit) and ``read_files`` the files they were read from."""
        self._ensure_open()
        self._added.extend(markers)
        self._inserted += inserted
        self._deleted += deleted
        if touched_keys is not None:
            self._touched.append(self._keys_of(touched_keys))
        self._read_partitions.update(_partition_of(m) for m in read_files)

    def check_delete_marks(self, incoming: pa.Table) -> None:
        """Refuse delete marks that cancel no live entry, before anything is written.

        ``incoming`` holds rows with their ``dml_type`` (value columns it lacks are NULL, as
        they will be written). Each mark must cancel an entry of its key with exactly its values
        that is live at the snapshot plus this transaction's writes, or an insertion of
        ``incoming`` itself; otherwise the key's sign sum would drop below its live entries and
        ``count()`` and totals would disagree with the visible rows."""
        marks = pc.equal(incoming.column(DML_TYPE), -1)
        if not pc.any(marks).as_py():
            return
        target = file_schema(self._schema, self._config)
        values = self._value_columns
        entries = pa.table(
            {
                **{
                    c: incoming.column(c).cast(target.field(c).type)
                    if c in incoming.column_names
                    else pa.nulls(incoming.num_rows, target.field(c).type)
                    for c in values
                },
                DML_TYPE: incoming.column(DML_TYPE).cast(pa.int8()),
            }
        )
        _, live = self._read_live(keys=self._keys_of(entries.filter(marks)))
        unmatched = rmw.unmatched_marks(live.select(values), entries, self.key_columns, values)
        if unmatched.num_rows:
            raise unmatched_marks_error(
                self._table.name,
                unmatched,
                "Nothing was written; read the key's current entries (e.g. views.history) and "
                "mark those, or use delete/update",
            )

    def begin_operation(self, operation: str) -> bool:
        """Start an engine's own operation; True means skip it (its app batch was already
        committed)."""
        return self._begin(operation)

    def adopt_schema(self, schema: TableSchema) -> None:
        """Set the schema this transaction commits (an engine checked and evolved it)."""
        self._schema = self._policy_accepts(schema) if schema != self._schema else schema

    def _policy_accepts(self, schema: TableSchema) -> TableSchema:
        """``schema`` if the table's merge policy accepts it; an evolved schema the policy cannot
        merge (a new column an aggregating policy has no function for) is refused here, before
        anything is written, rather than by every later read."""
        try:
            load_policy(self._config.policy, schema, self._config)
        except InvalidArgumentError as e:
            added = [n for n in schema.names if n not in self._schema.names]
            raise SchemaError(
                f"the new columns {added} cannot be added: {e}. Nothing was written; leave "
                "these columns out, or create a table whose merge policy names them"
            ) from e
        return schema

    @property
    def schema(self) -> TableSchema:
        """The schema this transaction writes: the snapshot's, or as its writes evolved it."""
        return self._schema

    @property
    def config(self) -> TableConfig:
        return self._config

    @property
    def base_state(self) -> TableState:
        """The snapshot this transaction reads."""
        return self._base

    @property
    def written_files(self) -> list[FileMarker]:
        """Files this transaction wrote so far (its own reads see them)."""
        return list(self._added)

    @property
    def evolves_schema(self) -> bool:
        return self._evolve

    @property
    def table(self) -> Table:
        return self._table

    def refuse_marks_if_insert_only(self, marks: int) -> None:
        """Raise :class:`InvalidArgumentError` if ``marks`` delete marks are about to be written
        to an insert-only table; checked before any entry is made (an engine writing its own
        entries calls it too)."""
        if marks and self._config.policy.get("insert_only"):
            raise InvalidArgumentError(
                f"table {self._table.name!r} is insert_only (its merge policy keeps min/max, "
                "which a delete mark cannot undo): it refuses updates, deletes and delete marks"
            )

    def refuse_replacements_dropped_as_repeats(self, marks: int) -> None:
        """Raise :class:`InvalidArgumentError` if an update or upsert is about to replace
        ``marks`` entries of existing keys on a table whose merge policy would drop the new rows
        as repeats (a dedup table keyed by its ``dedup_key``): the rows would vanish. Checked
        before any entry is made (an engine writing its own entries calls it too)."""
        if marks and not self._policy.keeps_replacements(tuple(self.key_columns)):
            raise InvalidArgumentError(
                f"table {self._table.name!r} drops an entry whose dedup key (its primary key) "
                "repeats an earlier one, so a new row for an existing key would be dropped and "
                "the key's row lost: it takes inserts of new keys and deletes, not updates; "
                "correct its rows in a collapsing or replacing table"
            )

    def _write(self, entries: pa.Table) -> int:
        writer = DataWriter(
            self._table.store,
            self._table.prefix,
            self._schema,
            self._config,
            PartitionSpec.parse(list(self._config.partition_by), self._schema),
        )
        self._added.extend(writer.write(entries))
        return int(entries.num_rows)

    def _replace(self, keyed: Rows, latest: pa.Table, marks: pa.Table) -> int:
        self.refuse_marks_if_insert_only(marks.num_rows)
        self.refuse_replacements_dropped_as_repeats(marks.num_rows)
        # A column a row did not name keeps the key's current value (an explicit None sets
        # NULL); so does a partition column, and the row stays in its partition.
        rows = rmw.fill_missing(
            keyed.table, latest, self.key_columns, self._value_columns, given=keyed.given
        )
        self._refuse_stale_versions(rows)
        entries = pa.concat_tables([self._entries(marks, -1), self._entries(rows, 1)])
        self._write(entries)
        self._touched.append(self._keys_of(rows))
        self._deleted += marks.num_rows
        self._inserted += rows.num_rows
        return int(rows.num_rows)

    def _mark(self, marks: pa.Table, keys: pa.Table) -> int:
        self.refuse_marks_if_insert_only(marks.num_rows)
        if marks.num_rows:
            self._write(self._entries(marks, -1))
        self._touched.append(self._keys_of(keys))
        self._deleted += marks.num_rows
        return int(marks.num_rows)

    def _discard_files(self) -> None:
        """Delete what a transaction that certainly did not commit wrote: its data files and
        its trx_id reservation (an id that never commits may be reserved again)."""
        keys = [self._table.prefix + marker.path for marker in self._added]
        if self._reservation_held:
            keys.append(reservation_key(self._table.prefix, self._trx_id))
        for key in keys:
            try:
                self._table.store.delete(key)
            except Exception as e:  # best effort: vacuum collects orphans later
                log.warning("could not delete uncommitted file %s: %s", key, e)

    # --- internals: reads ----------------------------------------------------------------------

    def _visible_markers(self, keys: pa.Table | None) -> list[FileMarker]:
        markers = [*self._base.alive_files, *self._added]
        if keys is not None:
            markers = prune_by_keys(markers, keys, self.key_columns)
        self._read_partitions.update(_partition_of(m) for m in markers)
        return markers

    def _read_live(
        self, keys: pa.Table | None, predicate: str | None = None, shown: str | None = None
    ) -> tuple[pa.Table, pa.Table]:
        """The visible row per key and every live entry (the delete marks to write), for the
        given keys or predicate, at the snapshot plus this transaction's writes."""
        try:
            return rmw.live_rows(
                self._table.store,
                self._table.prefix,
                self._visible_markers(keys),
                file_schema(self._schema, self._config),
                self.key_columns,
                self._value_columns,
                keys=keys,
                predicate=predicate,
                latest_first=self._latest_first(),
                marks_in_entry_order=not self._policy.keys_independent,
            )
        except QUERY_ERRORS as e:
            if predicate is None:
                raise
            raise InvalidPredicateError(
                f"predicate {shown or predicate!r} does not apply to table "
                f"{self._table.name!r} (columns {self._schema.names}): {engine_reason(e)}"
            ) from e
        except RUNNING_ERRORS as e:
            if predicate is None:
                raise
            raise InvalidPredicateError(
                f"predicate {shown or predicate!r} failed on the rows of table "
                f"{self._table.name!r}: {engine_reason(e)}; nothing was written"
            ) from e

    @functools.cached_property
    def _policy(self) -> MergePolicy:
        """The table's merge policy at the snapshot (its options never change)."""
        return load_policy(self._config.policy, self._schema, self._config)

    def _latest_order(self) -> list[str] | None:
        """The columns putting a key's latest entry first (each descending, NULLs last) when
        the policy shows each key's latest entry (merges drop older ones); None when the
        visible rows are signed or aggregated."""
        policy = self._policy
        if policy.visible_rows != LATEST_VERSION:
            return None
        return policy.latest_order() or [TRX_ID, TRX_SEQ]

    def _latest_first(self) -> str | None:
        """:meth:`_latest_order` as ORDER BY text."""
        order = self._latest_order()
        return None if order is None else ", ".join(f"{ident(c)} DESC NULLS LAST" for c in order)

    def _refuse_stale_versions(self, rows: pa.Table) -> None:
        """On a replacing table with a version column, a new row must rank at or above its
        key's latest entry: below it, the old row (or the delete mark of a deleted key) would
        stay the latest, and the mark this write adds would hide the key altogether."""
        order = self._latest_order() or []
        # User columns ranking a key's entries ahead of the ledger order: its version column.
        versions = [c for c in order if c not in (TRX_ID, TRX_SEQ)]
        if not versions or not rows.num_rows:
            return
        version_column = versions[0]
        stale = rmw.stale_versions(
            self._table.store,
            self._table.prefix,
            self._visible_markers(rows.select(list(self.key_columns))),
            file_schema(self._schema, self._config),
            self.key_columns,
            rows,
            version_column,
            ", ".join(f"{ident(c)} DESC NULLS LAST" for c in order),
        )
        if stale.num_rows:
            raise StaleVersionError(
                f"{stale.num_rows} row(s) give {version_column!r} a version below the "
                f"current version of their key (NULL ranks lowest), e.g. "
                f"{stale.slice(0, 3).to_pylist()}; table {self._table.name!r} shows the row "
                "with the highest version, so give a version at or above the current one "
                "(insert records an older version without replacing the newer row)"
            )

    def _check_conflicts(self, latest: TableState, intervening: Sequence[LogFile]) -> None:
        """Raise if a commit since the snapshot wrote entries for a key this transaction read,
        or a row matching a predicate it deleted by."""
        if self._held_since is not None and any(e.trx_id == self.trx_id for e in intervening):
            # Vacuum's time rule keeps a held snapshot's id from repeating a committed one; if
            # a clock misled it, the commit carrying the id shows it: start again on the latest.
            raise HeldSnapshotOutdatedError(
                f"table {self._table.name!r}: trx_id {self.trx_id} was committed by another "
                "transaction since this one's held snapshot; nothing was committed. Retry"
            )
        if not self._touched and not self._predicates:
            return
        unchecked = [e for e in intervening if e.version > self._checked_through]
        writing: list[LogFile] = []
        for entry in unchecked:
            if entry.operation in MEANING_PRESERVING:
                continue
            if entry.operation in PARTITION_REMOVING:
                removed = {_partition_of(m) for m in entry.files if not m.alive}
                mine = self._read_partitions | {_partition_of(m) for m in self._added}
                if removed & mine:
                    raise ConflictError(
                        f"table {self._table.name!r}: version {entry.version} "
                        f"({entry.operation}) removed entries of partitions this transaction "
                        "read; nothing was committed. Retry the transaction"
                    )
            if any(m.alive for m in entry.files):
                writing.append(entry)
        # One read over the files of every unchecked commit (a steady stream of appends would
        # otherwise outpace a check per commit); the commit is named only when one conflicts.
        everything = [m for entry in writing for m in entry.files if m.alive]
        if everything and self._conflicts_with(latest, everything):
            for entry in writing:
                if self._conflicts_with(latest, [m for m in entry.files if m.alive]):
                    raise ConflictError(
                        f"table {self._table.name!r}: version {entry.version} "
                        f"({entry.operation}) wrote rows this transaction read after its "
                        f"snapshot (version {self._base.version}); nothing was committed. "
                        "Retry the transaction"
                    )
            raise ConflictError(
                f"table {self._table.name!r}: versions {[e.version for e in writing]} wrote "
                "rows this transaction read after its snapshot; nothing was committed. Retry "
                "the transaction"
            )
        if unchecked:
            self._checked_through = max(e.version for e in unchecked)

    def _conflicts_with(self, latest: TableState, written: list[FileMarker]) -> bool:
        keys = pa.concat_tables(self._touched) if self._touched else None
        return rmw.entries_touch(
            self._table.store,
            self._table.prefix,
            file_schema(latest.schema, latest.config),
            self.key_columns,
            keys_files=[] if keys is None else prune_by_keys(written, keys, self.key_columns),
            keys=keys,
            predicate_files=written,
            predicates=self._predicates,
        )


def _reserve_and_read(
    table: Table, held_snapshot: bool, reserve_ahead: bool
) -> tuple[int, TableState, float | None, SpeculativeReservation | None]:
    """Reserve the transaction's ``trx_id``, then read its snapshot; return both and, when the
    snapshot is the handle's held state, when that state was confirmed the latest, and the
    speculative reservation still to settle, if any.

    With ``held_snapshot``, a held state confirmed recently (``ledger.log.handle.is_recent``)
    is the snapshot without a listing of the log: vacuum cannot have deleted the commits or
    reservations made after it, so the id reserved above the listed reservations is above
    every committed one, and the commit's put-if-absent of the next version finds any commit
    made since (docs/format.md 6.1).

    The id is reserved above every reservation listed from the handle's cached largest
    ``trx_id`` (so above every transaction still running: merges take ids below a running
    one's to be settled), then the snapshot read after it confirms it: if every committed id is
    below the reservation, commits the cache missed cannot outrank it. Otherwise (the cache was
    stale and vacuum had deleted the reservations of settled ids) the id is given back and
    reserved again above the committed maximum just read.
    """
    recent = table.handle.recent_state() if held_snapshot else None
    if recent is not None:
        held, confirmed_at = recent
        body = reservation_body(held.version)
        if reserve_ahead and table.store.local_path(table.prefix) is None:
            # On an object store each request is a round trip: the listing of _trx/ and the
            # reservation are sent together, and the rows are written meanwhile (settled
            # before the commit; docs/format.md 6.1). A local disk answers faster than threads
            # hand work over.
            speculation = SpeculativeReservation(
                table.store, table.prefix, held.max_trx_id, body, start_request
            )
            return speculation.trx_id, held, confirmed_at, speculation
        trx_id = reserve_trx_id(table.store, table.prefix, held.max_trx_id, body)
        return trx_id, held, confirmed_at, None
    cached = table.handle.state
    trx_id = reserve_trx_id(
        table.store, table.prefix, cached.max_trx_id, reservation_body(cached.version)
    )
    known = _read_or_release(table, trx_id)
    if known.max_trx_id < trx_id:
        return trx_id, known, None, None
    _release(table, trx_id)
    log.debug("table %s: trx_id %d is not above committed ids; reserving anew", table.name, trx_id)
    trx_id = reserve_trx_id(
        table.store, table.prefix, known.max_trx_id, reservation_body(known.version)
    )
    return trx_id, _read_or_release(table, trx_id), None, None


def _read_or_release(table: Table, trx_id: int) -> TableState:
    try:
        return table.handle.latest_state()
    except BaseException:
        _release(table, trx_id)
        raise


def _release(table: Table, trx_id: int) -> None:
    """Give back a reservation no commit will carry (an id never committed may be reserved
    again)."""
    table.store.delete(reservation_key(table.prefix, trx_id))


def unmatched_marks_error(
    table_name: str, unmatched: pa.Table, advice: str
) -> UnmatchedDeleteMarkError:
    """The error for delete marks that cancel no live entry (``unmatched``, as
    :func:`ledger.engines.duckdb.rmw.unmatched_marks` finds them), ending with ``advice``."""
    examples = unmatched.drop_columns([EXCESS]).slice(0, 3).to_pylist()
    return UnmatchedDeleteMarkError(
        f"{int(pc.sum(unmatched.column(EXCESS)).as_py())} delete mark(s) of table "
        f"{table_name!r} cancel no live entry, e.g. {examples}: a mark must carry exactly the "
        "values (every column) of a live entry of its key, once per entry it cancels. " + advice
    )


def check_timeout(latest: TableState, started_ms: int, table_name: str) -> None:
    """Refuse to commit work begun longer ago than the table's transaction timeout: vacuum may
    already have deleted its files as orphans."""
    age = int(time.time() * 1000) - started_ms
    if age > latest.config.transaction_timeout_ms:
        raise TransactionTimeoutError(
            f"table {table_name!r}: this transaction began {age / 1000:.1f} s ago, longer than "
            f"the table's transaction_timeout ({latest.config.transaction_timeout_ms / 1000} s); "
            "nothing was committed. Retry it in smaller pieces"
        )


def _app_batches(apps: Mapping[str, int] | None) -> dict[str, int]:
    """``apps`` checked: non-empty app ids, each with a whole batch number."""
    if apps is None:
        return {}
    if not isinstance(apps, Mapping):
        raise InvalidArgumentError(f"apps must map app ids to batches, not {apps!r}")
    checked: dict[str, int] = {}
    for app_id, batch in apps.items():
        if not isinstance(app_id, str) or not app_id:
            raise InvalidArgumentError(f"an app id must be non-empty text, not {app_id!r}")
        checked[app_id] = arguments.whole_number(batch, "batch")
    return checked


def _any_committed(tokens: Mapping[str, int], state: TableState) -> bool:
    """Whether ``state`` holds any of these app batches (or a later batch of its app)."""
    return any(state.apps.get(app_id, -1) >= batch for app_id, batch in tokens.items())


# Plain values (a number, a tuple, a set, ...) that are no form of rows: given as keys, the
# caller most likely meant one key and forgot the list around it.
_PLAIN_VALUE_MODULES = frozenset({"builtins", "decimal", "datetime", "uuid"})


def _key_values(keys: Any, key_columns: list[str]) -> Any:
    """Keys given as one array of values (a pandas Series, Index or ExtensionArray, a numpy
    array, an Arrow array), as a list of keys would give them: for a key of one column, an
    Arrow table of that column (its values keep their types, a Series of Timestamps or of
    nullable ints among them); for a key of several, its rows as tuples (a 2-D numpy array, a
    Series of tuples). Anything else is returned as given."""
    module = type(keys).__module__
    if module.startswith("pandas") and type(keys).__name__ == "MultiIndex":
        # The index of a frame keyed by set_index([...]): its levels by name, else in order.
        if set(key_columns) <= set(keys.names):
            return keys.to_frame(index=False)
        return [tuple(k) for k in keys.tolist()]
    is_pandas = module.startswith("pandas") and _is_pandas_array(keys)
    is_numpy = module == "numpy" and type(keys).__name__ == "ndarray"
    is_polars = module.startswith("polars") and type(keys).__name__ == "Series"
    if not (is_pandas or is_numpy or is_polars or isinstance(keys, pa.Array | pa.ChunkedArray)):
        return keys
    if is_polars:
        keys = keys.to_arrow()
    if len(key_columns) == 1 and not (is_numpy and keys.ndim != 1):
        try:
            values = keys if isinstance(keys, pa.Array | pa.ChunkedArray) else pa.array(keys)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise TypeMismatchError(
                f"the keys do not convert to one column of {key_columns[0]!r}: {e}"
            ) from e
        return pa.table({key_columns[0]: values})
    values = keys.to_pylist() if isinstance(keys, pa.Array | pa.ChunkedArray) else keys.tolist()
    return [tuple(k) if isinstance(k, list) else k for k in values]


def _is_pandas_array(keys: Any) -> bool:
    """Whether ``keys`` (of a pandas module, so pandas is imported) is a Series, an Index or an
    ExtensionArray (``frame["id"].array``: nullable, pyarrow-backed, text, zoned times)."""
    import pandas as pd  # type: ignore[import-untyped]

    return isinstance(keys, pd.Series | pd.Index | pd.api.extensions.ExtensionArray)


def _check_key_form(keys: Any, key_columns: list[str]) -> None:
    """Refuse keys given in no form a keyed operation accepts, saying which forms it does."""
    if isinstance(keys, list | dict | str | os.PathLike) or keys is None:
        return
    if type(keys).__module__ not in _PLAIN_VALUE_MODULES and is_rows_source(keys):
        return  # a data frame, Arrow table or relation holding the key columns
    example = "[(1, 'a'), (2, 'b')]" if len(key_columns) > 1 else "['K-1', 'K-2']"
    arrays = (
        "; for a key of one column, one array of its values (a pandas or polars Series, a "
        "pandas Index or ExtensionArray, a numpy or Arrow array)"
        if len(key_columns) == 1
        else "; a 2-D numpy array of key rows"
    )
    raise InvalidArgumentError(
        f"keys must be a list of keys, not {type(keys).__name__} {keys!r}: a list of key "
        f"values ({example}; the key is {key_columns}), a list of dicts naming the key "
        f"columns{arrays}, or rows holding the key columns in any form writes take (a "
        "DataFrame, an Arrow table, a file path)"
    )


def _key_tuple(key: Any, key_columns: list[str]) -> tuple[Any, ...]:
    """A key given as a tuple (or list) of values: one per key column, in key order."""
    if not isinstance(key, tuple | list) or len(key) != len(key_columns):
        raise InvalidArgumentError(
            f"key {key!r} does not give one value per key column {key_columns}: pass tuples of "
            f"{len(key_columns)} values in that order, or dicts"
        )
    return tuple(key)


def _partition_of(marker: FileMarker) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(marker.partition.items()))


def _check_unique(rows: pa.Table, key_columns: Iterable[str]) -> None:
    names = list(key_columns)
    if distinct_integer_keys(rows.select(names)):
        return
    # Positional names: Arrow reads a name starting with "." as a nested field path.
    positional = [f"key{i}" for i in range(len(names))]
    keys = rows.select(names).rename_columns(positional)
    counts = keys.group_by(positional).aggregate([([], "count_all")])
    duplicated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if duplicated.num_rows:
        examples = duplicated.select(positional).rename_columns(names).slice(0, 3).to_pylist()
        raise DuplicateKeyError(
            f"{duplicated.num_rows} key(s) appear more than once in one operation, e.g. "
            f"{examples}; give each key "
            "once (or split the changes into separate operations)"
        )


@contextlib.contextmanager
def _rows_named_in_whole_input(rows_before: int) -> Iterator[None]:
    """A value refused in a chunk of the caller's data that starts ``rows_before`` rows in (a
    large DataFrame or Arrow table, a stream of batches) named by its row in the whole data."""
    try:
        yield
    except TypeMismatchError as refused:
        renumbered = renumbered_refusal(refused, rows_before)
        if renumbered is None:
            raise
        raise renumbered from refused


def _refuse_non_numeric_signs(kind: pa.DataType) -> None:
    """Raise :class:`TypeMismatchError` unless ``dml_type`` holds numbers: ``True`` or ``"-1"``
    would otherwise be read as a sign (or fail inside Arrow)."""
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
        raise TypeMismatchError(
            f"dml_type must be the number +1 or -1 in every row, never NULL; got values of type "
            f"{kind} (give the integers 1 and -1, not booleans or text)"
        )


def refuse_ungenerated_row_ids(ids: pa.ChunkedArray, first_free: int) -> None:
    """Refuse an inserted ``_row_id`` at or past ``first_free``, the first id the table has not
    generated yet (its own or a later transaction's to generate)."""
    if ids.null_count < len(ids) and pc.max(ids).as_py() >= first_free:
        raise InvalidArgumentError(
            f"_row_id {pc.max(ids).as_py()} was not generated by this table yet: inserted "
            "rows get their _row_id generated (leave it out); only ids read from the table "
            "may be given"
        )


def cast_row_ids(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A given ``_row_id`` column as BIGINT, or the error for NULLs or other values."""
    if column.null_count:
        raise MissingKeyError("_row_id holds NULL; every row is addressed by its _row_id")
    try:
        return column.cast(pa.int64(), safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise TypeMismatchError(f"_row_id must be a BIGINT: {e}") from e


__all__ = ["CommitInfo", "Transaction", "cast_row_ids", "refuse_ungenerated_row_ids"]
