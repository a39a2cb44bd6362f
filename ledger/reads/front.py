"""The public reads on the embedded DuckDB engine, with their argument checks: lazy relations
over a snapshot's files. ``views`` re-exports them (the public names); the command line calls
them from here, so nothing under ``ledger`` imports ``views``.

>>> import views
>>> views.visible(table).df()                                             # doctest: +SKIP
>>> views.totals(table, by=["day"], sum=["amount"], avg=["amount"]).fetchall()  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ledger.engines.duckdb.errors import FAILED_ON_ROWS, VALUE_ERRORS, engine_reason
from ledger.engines.duckdb.query import check_condition
from ledger.engines.duckdb.session import read_connection
from ledger.errors import InvalidArgumentError, InvalidPredicateError, TotalOverflowError
from ledger.reads import changes as change_reads
from ledger.reads import history as history_reads
from ledger.reads import totals as total_reads
from ledger.reads import visible as visible_reads
from ledger.rollup import Rollup
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql.decimals import decimal_types, sum_may_overflow
from ledger.sql.spec import TableSpec
from ledger.sql.totals import TotalsRequest, check_totals_request
from ledger.sql.trees import render
from ledger.sql.view_text import view_text
from ledger.table import Table

if TYPE_CHECKING:
    import duckdb


def _snapshot(
    table: Table | Rollup | Snapshot, version: int | None, timestamp: dt.datetime | int | None
) -> Snapshot:
    if isinstance(table, Snapshot):
        if version is not None or timestamp is not None:
            raise InvalidArgumentError("a snapshot has its version already: pass no version")
        return table
    return _table(table).snapshot(version, timestamp)


def _table(table: Table | Rollup) -> Table:
    """The table a view reads: a rollup is read as its own (aggregating) table."""
    if isinstance(table, Rollup):
        return table.table
    if not isinstance(table, Table):
        raise InvalidArgumentError(
            f"views read a Table, a Rollup or a Snapshot, not {type(table).__name__}"
        )
    return table


def _connection(
    con: duckdb.DuckDBPyConnection | None, snap: Snapshot | Table
) -> duckdb.DuckDBPyConnection:
    return read_connection(snap.store, con)


def visible(
    table: Table | Rollup | Snapshot,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    partitions: PartitionFilter = None,
    system_columns: bool = False,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """The latest visible row of every key at a snapshot, as a lazy DuckDB relation.

    Collapsing, dedup and custom tables: the latest insertion among a key's entries that are
    not cancelled by a delete mark; replacing tables: a key's latest entry unless it is a
    delete mark; aggregating tables: one row per group with its measures merged. With
    ``system_columns``, ``_row_id`` (tables without a key) and the row's ``trx_id`` and
    ``trx_seq`` are added. With ``partitions``, the visible rows of those partitions: files
    are chosen from the log before any is opened (docs/views.md section 5).

    >>> views.visible(accounts, version=12).fetchall()                     # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    return visible_reads.visible(
        snap, _connection(con, snap), partitions=partitions, system_columns=system_columns
    )


def rows(
    table: Table | Rollup | Snapshot,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    where: str | None = None,
    columns: Sequence[str] | str | None = None,
    partitions: PartitionFilter = None,
) -> pa.Table:
    """The visible rows at a snapshot as an Arrow table, in one call: :func:`visible`,
    filtered by ``where`` (a SQL predicate over the table's columns, as in ``delete_where``)
    and cut to ``columns`` (default: every column, in schema order). Types stay exact:
    DECIMAL stays decimal, TIMESTAMPTZ stays in UTC.

    >>> views.rows(accounts, where="amount > 0", columns=["account"])       # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    return visible_reads.rows(snap, where=where, columns=columns, partitions=partitions)


def totals(
    table: Table | Rollup | Snapshot,
    by: Sequence[str] | str | None = None,
    sum: Sequence[str] | str | None = None,
    count: bool = True,
    avg: Sequence[str] | str | None = None,
    where: str | None = None,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    partitions: PartitionFilter = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """COUNT, SUM and AVG per group of ``by`` columns, straight from the ledger: every entry is
    weighted by its ``dml_type`` (a delete mark carries the values it cancels), so no latest
    row is looked for. Equal to the same aggregates over :func:`visible`; groups holding no
    visible row are left out. Columns: the ``by`` columns, ``count``, ``sum_<x>``, ``avg_<x>``.
    ``where`` filters entries with a SQL predicate over the table's columns.

    >>> views.totals(metrics, by=["device_id"], avg=["temperature"]).fetchall()  # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    request = check_totals_request(TableSpec.of(snap.state), by, sum, count, avg, where)
    if request.where is not None:
        check_condition(
            snap.state.schema.arrow(),
            render(request.where, visible_reads.DUCKDB),
            shown=where,
        )
    connection = _connection(con, snap)
    relation = total_reads.totals(snap, connection, request, partitions=partitions)
    return _overflow_checked(relation, connection, snap, request, partitions, where)


def _overflow_checked(
    relation: duckdb.DuckDBPyRelation,
    con: duckdb.DuckDBPyConnection,
    snap: Snapshot,
    request: TotalsRequest,
    partitions: PartitionFilter,
    where: str | None,
) -> duckdb.DuckDBPyRelation:
    """``relation``, computed at once when a DECIMAL sum may exceed 38 digits (a wide column
    over enough entries), so that an overflow is a :class:`TotalOverflowError` here rather than
    the engine's error wherever the lazy relation is read."""
    rows = sum(m.rows for m in snap.markers(partitions))
    decimals = decimal_types(TableSpec.of(snap.state))
    wide = [
        c
        for c in dict.fromkeys([*request.sums, *request.avgs])
        if c in decimals and sum_may_overflow(decimals[c][0], rows)
    ]
    if not wide:
        return relation
    try:
        result = relation.to_arrow_table()
    except FAILED_ON_ROWS as e:  # a sum does not fail so: the predicate did
        if where is None:
            raise
        raise InvalidPredicateError(
            f"predicate {where!r} failed on the rows of table {snap.name!r}: {engine_reason(e)}"
        ) from e
    except VALUE_ERRORS as e:
        raise TotalOverflowError(
            f"totals: the sum of {' or '.join(map(repr, wide))} over the table's entries does "
            "not fit a DECIMAL(38); total fewer rows at a time (by=..., where=...), merge the "
            "table (a corrected value counts until a merge cancels it), or keep the column "
            "with a smaller scale, which leaves more whole digits"
            + (f" (or where={where!r} failed on a value)" if where is not None else "")
            + f": {engine_reason(e)}"
        ) from e
    return con.from_arrow(result)


def history(
    table: Table | Rollup | Snapshot,
    key: Any,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """Every entry of one key (or of several: a list of keys), oldest first, with its
    ``trx_id``, ``trx_seq``, ``dml_type`` and, while its commit is still in the log, its
    ``_commit_version`` and ``_commit_timestamp``. Merges cancel an insertion and its delete
    mark, so versions a merge collapsed are no longer listed.

    ``key`` is a value (one-column key), a tuple or a dict of the key columns; tables without
    a primary key are keyed by ``_row_id``.

    >>> views.history(accounts, "A-1").fetchall()                           # doctest: +SKIP
    """
    request = history_reads.history_request(_snapshot(table, version, timestamp), key)
    return history_reads.history(request, _connection(con, request.snapshot))


def changes(
    table: Table | Rollup,
    since_version: int,
    until_version: int | None = None,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """The change feed: every entry committed after ``since_version`` (up to
    ``until_version``, default the latest), with ``_change_type`` (``insert``, ``delete``,
    ``update_preimage``, ``update_postimage``), ``_commit_version`` and
    ``_commit_timestamp``. Merges and vacuums change nothing and add nothing; dropped or
    rewritten partitions show their removed rows as deletes.

    >>> views.changes(accounts, since_version=10).fetchall()                # doctest: +SKIP
    """
    if isinstance(table, Snapshot):
        raise InvalidArgumentError("changes read a Table (its log), not a snapshot")
    source = _table(table)
    return change_reads.changes(source, since_version, until_version, _connection(con, source))


def sql(
    table: Table | Rollup | Snapshot,
    kind: str,
    dialect: str = "duckdb",
    *,
    source: str | None = None,
    system_columns: bool = False,
    by: Sequence[str] | str | None = None,
    sum: Sequence[str] | str | None = None,
    count: bool = True,
    avg: Sequence[str] | str | None = None,
    where: str | None = None,
) -> str:
    """The SQL text of a view for another engine (``dialect``: ``duckdb`` or ``spark``), over
    a relation named ``source`` (default: the table's name) holding the raw ledger: every
    entry with its system columns, as in the data files. For ``changes``, ``source`` also
    carries ``_commit_version`` and ``_commit_timestamp``.

    >>> print(views.sql(accounts, "visible", dialect="spark"))              # doctest: +SKIP
    """
    snap = _snapshot(table, None, None)
    return view_text(
        TableSpec.of(snap.state),
        kind,
        dialect,
        source if source is not None else snap.name,
        system_columns=system_columns,
        by=by,
        sum=sum,
        count=count,
        avg=avg,
        where=where,
    )
