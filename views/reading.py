"""Views run on the embedded DuckDB engine: lazy relations over a snapshot's files.

>>> import views
>>> views.visible(table).df()                                             # doctest: +SKIP
>>> views.totals(table, by=["day"], sum=["amount"], avg=["amount"]).fetchall()  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ledger.changes import change_set
from ledger.engines import engine_named
from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.query import check_condition
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations, connect
from ledger.errors import InvalidArgumentError, MissingKeyError, UnknownColumnError
from ledger.log.entries import FileMarker
from ledger.log.table_log import TableLog
from ledger.pruning import prune_by_keys
from ledger.rollup import Rollup
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql import ident
from ledger.table import Table
from ledger.writer import file_schema
from views import queries
from views.dialects import DIALECTS, dialect_named
from views.files import insertions_only, split_isolated
from views.spec import TableSpec

if TYPE_CHECKING:
    import duckdb

DUCKDB = DIALECTS["duckdb"]
# Policies whose entries never repeat across files in a way only a key-wide pass can see.
_ISOLATION_POLICIES = ("collapsing", "custom", "replacing", "dedup")
_UNWEIGHTED_POLICIES = ("collapsing", "custom")
KINDS = ("visible", "totals", "changes")


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


def _connection(con: duckdb.DuckDBPyConnection | None) -> duckdb.DuckDBPyConnection:
    return con if con is not None else connect()


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
    ``trx_seq`` are added. Partitions are pruned from the log before any file is opened.

    >>> views.visible(accounts, version=12).fetchall()                     # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    spec = TableSpec.of(snap.state)
    connection = _connection(con)
    markers = snap.markers(partitions)
    isolated: list[Any] = []
    if _isolation_allowed(spec):
        key_types = [_key_type(snap, k) for k in spec.key_columns]
        isolated, markers = split_isolated(markers, key_types)
    schema = file_schema(snap.state.schema, snap.state.config)
    relations = {"entries": scan_files(connection, snap.store, snap.prefix, markers, schema)}
    if isolated:
        relations["isolated"] = scan_files(connection, snap.store, snap.prefix, isolated, schema)
    names = bind_relations(connection, relations)
    query = queries.visible(
        spec,
        DUCKDB,
        queries.Sources(entries=names["entries"], isolated=names.get("isolated")),
        system_columns=system_columns,
    )
    return connection.sql(queries.render(query, DUCKDB))


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
    spec = TableSpec.of(snap.state)
    chosen = _chosen_columns(spec, columns)
    condition = queries.parse_predicate(spec, DUCKDB, where)
    if condition is not None:
        check_condition(snap.state.schema.arrow(), queries.render(condition, DUCKDB), shown=where)
    connection = connect()
    try:
        relation = visible(snap, partitions=partitions, con=connection)
        if condition is not None:
            relation = relation.filter(queries.render(condition, DUCKDB))
        relation = relation.project(", ".join(ident(c) for c in chosen))
        with storage_errors(f"reading {snap.name!r}"):
            return relation.to_arrow_table()
    finally:
        connection.close()


def _chosen_columns(spec: TableSpec, columns: Sequence[str] | str | None) -> list[str]:
    if columns is None:
        return list(spec.columns)
    chosen = [columns] if isinstance(columns, str) else columns
    if not isinstance(chosen, Sequence) or not all(isinstance(c, str) for c in chosen):
        raise InvalidArgumentError(f"columns must be a list of column names, not {columns!r}")
    if not chosen:
        raise InvalidArgumentError("columns names no column; pass None for every column")
    unknown = [c for c in chosen if c not in spec.columns]
    if unknown:
        raise UnknownColumnError(
            f"columns {unknown} are not columns of the table (columns: {list(spec.columns)})"
        )
    if len(set(chosen)) != len(chosen):
        raise InvalidArgumentError(f"columns repeats a column: {list(chosen)}")
    return list(chosen)


def _isolation_allowed(spec: TableSpec) -> bool:
    # A dedup key other than the table key can repeat across files with disjoint key ranges.
    return spec.policy.name in _ISOLATION_POLICIES and spec.option("dedup_key") is None


def _key_type(snap: Snapshot, column: str) -> pa.DataType:
    return file_schema(snap.state.schema, snap.state.config).field(column).type


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
    spec = TableSpec.of(snap.state)
    request = queries.check_totals_request(spec, DUCKDB, by, sum, count, avg, where)
    if request.where is not None:
        check_condition(
            snap.state.schema.arrow(), queries.render(request.where, DUCKDB), shown=where
        )
    connection = _connection(con)
    markers = snap.markers(partitions)
    schema = file_schema(snap.state.schema, snap.state.config)
    plain: list[Any] = []
    if spec.policy.name in _UNWEIGHTED_POLICIES:
        plain = [m for m in markers if insertions_only(m)]
        markers = [m for m in markers if not insertions_only(m)]
    relations = {"entries": scan_files(connection, snap.store, snap.prefix, markers, schema)}
    if plain:
        relations["insertions"] = scan_files(connection, snap.store, snap.prefix, plain, schema)
    names = bind_relations(connection, relations)
    sources = queries.Sources(entries=names["entries"], insertions=names.get("insertions"))
    non_finite = _non_finite_marks(connection, spec, request, names["entries"], markers)
    query = queries.totals(spec, DUCKDB, sources, request, non_finite_marks=non_finite)
    return connection.sql(queries.render(query, DUCKDB))


def _non_finite_marks(
    connection: duckdb.DuckDBPyConnection,
    spec: TableSpec,
    request: queries.TotalsRequest,
    entries: str,
    markers: Sequence[Any],
) -> set[str]:
    """The measured FLOAT/DOUBLE columns with NaN or an infinity in a delete mark (only files
    holding marks are read): the only ones whose weighted sum needs the slower exact form."""
    measured = [
        c
        for c in dict.fromkeys([*request.sums, *request.avgs])
        if pa.types.is_floating(spec.type_of(c))
    ]
    if not measured or spec.policy.name in ("replacing", "aggregating"):
        return set()
    if all(insertions_only(m) for m in markers):
        return set()
    # Positive tests in a CASE only: DuckDB folds isnan() and NOT through Parquet statistics.
    probes = ", ".join(
        f"max(CASE WHEN dml_type = 1 THEN 0 WHEN {q} - {q} = 0 THEN 0 WHEN {q} IS NULL THEN 0 "
        "ELSE 1 END)"
        for q in (ident(c) for c in measured)
    )
    [found] = connection.sql(f"SELECT {probes} FROM {ident(entries)}").fetchall()
    return {c for c, flag in zip(measured, found, strict=True) if flag}


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
    request = history_request(table, key, version=version, timestamp=timestamp)
    snap = request.snapshot
    connection = _connection(con)
    names = bind_relations(
        connection,
        {
            "entries": scan_files(
                connection, snap.store, snap.prefix, request.files, request.file_schema
            ),
            "keys": connection.from_arrow(request.keys),
            "commits": connection.from_arrow(request.commits),
        },
    )
    return connection.sql(
        request.sql(
            "duckdb", entries=names["entries"], keys=names["keys"], commits=names["commits"]
        )
    )


@dataclass(frozen=True)
class HistoryRequest:
    """What a key history reads, for any engine: the files that may hold the keys (pruned by
    their key ranges), the keys as a table, and each transaction's commit version and time."""

    snapshot: Snapshot
    files: list[FileMarker]
    keys: pa.Table
    commits: pa.Table

    @property
    def file_schema(self) -> pa.Schema:
        return file_schema(self.snapshot.state.schema, self.snapshot.state.config)

    def sql(self, dialect: str, *, entries: str, keys: str, commits: str) -> str:
        """The history query in ``dialect`` over relations of the files' entries, the keys
        and the commits, named ``entries``, ``keys`` and ``commits``."""
        spec = TableSpec.of(self.snapshot.state)
        query = queries.history(spec, entries, keys, commits)
        return queries.render(query, dialect_named(dialect))


def history_request(
    table: Table | Rollup | Snapshot,
    key: Any,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
) -> HistoryRequest:
    """The inputs of :func:`history` (which engines other than DuckDB run themselves)."""
    snap = _snapshot(table, version, timestamp)
    spec = TableSpec.of(snap.state)
    keys = _key_rows(snap, spec, key)
    files = prune_by_keys(snap.markers(), keys, spec.key_columns)
    return HistoryRequest(snap, list(files), keys, _commit_times(snap))


def _key_rows(snap: Snapshot, spec: TableSpec, key: Any) -> pa.Table:
    columns = list(spec.key_columns)
    keys = key if isinstance(key, list) else [key]
    if not keys:
        raise InvalidArgumentError("history needs a key (or a non-empty list of keys)")
    rows = []
    for one in keys:
        values = one.values() if isinstance(one, dict) else one if isinstance(one, tuple) else [one]
        if any(v is None for v in values):
            raise MissingKeyError(f"key {one!r} holds NULL; keys are never NULL")
        if isinstance(one, dict):
            unknown = sorted(set(one) - set(columns))
            if unknown:
                raise UnknownColumnError(f"{unknown} are not key columns (the key is {columns})")
            if set(one) != set(columns):
                raise MissingKeyError(f"a key gives every key column {columns}; got {sorted(one)}")
            rows.append(one)
        elif isinstance(one, tuple):
            if len(one) != len(columns):
                raise MissingKeyError(f"a key tuple has {len(columns)} values {columns}; got {one}")
            rows.append(dict(zip(columns, one, strict=True)))
        elif len(columns) == 1:
            rows.append({columns[0]: one})
        else:
            raise InvalidArgumentError(
                f"the key has {len(columns)} columns {columns}: pass a tuple or a dict"
            )
    schema = file_schema(snap.state.schema, snap.state.config)
    key_schema = pa.schema([schema.field(c) for c in columns])
    try:
        rows = [{c: _key_value(v, key_schema.field(c).type) for c, v in r.items()} for r in rows]
        table = pa.Table.from_pylist(rows, schema=key_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"key {key!r} does not fit the key columns {key_schema}: {e}"
        ) from e
    return table


def _key_value(value: Any, kind: pa.DataType) -> Any:
    """A key value as given, or ISO text for a DATE or TIMESTAMP key column read as one
    (``views.history(probes, (17, "2026-11-02 10:00:00"))``)."""
    if not isinstance(value, str):
        return value
    if pa.types.is_timestamp(kind):
        return dt.datetime.fromisoformat(value)
    if pa.types.is_date(kind):
        return dt.date.fromisoformat(value)
    return value


def _commit_times(snap: Snapshot) -> pa.Table:
    """``trx_id`` -> commit version and time of every transaction commit of the snapshot's
    table still in the log, up to the snapshot's version (a Snapshot reads its table's log as
    a Table does)."""
    log = TableLog(snap.store, snap.prefix, snap.name)
    listing = log.listing()
    entries = log.read_many([k for v, k in sorted(listing.commits.items()) if v <= snap.version])
    records = [e for e in entries if e.trx_id is not None]
    return pa.table(
        {
            "trx_id": pa.array([e.trx_id for e in records], pa.int64()),
            queries.COMMIT_VERSION: pa.array([e.version for e in records], pa.int64()),
            queries.COMMIT_TIMESTAMP: pa.array([e.timestamp_ms for e in records], pa.int64()).cast(
                pa.timestamp("ms", "UTC")
            ),
        }
    )


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
    table = _table(table)
    found = change_set(table, since_version, until_version)
    snap = table.snapshot(found.until)
    spec = TableSpec.of(snap.state)
    connection = _connection(con)
    schema = file_schema(snap.state.schema, snap.state.config)
    entries = engine_named("duckdb").change_entries(
        connection, snap.store, snap.prefix, found, schema
    )
    names = bind_relations(connection, {"entries": entries})
    query = queries.changes(spec, queries.Sources(entries=names["entries"]))
    return connection.sql(queries.render(query, DUCKDB))


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
    target = dialect_named(dialect)
    snap = _snapshot(table, None, None)
    spec = TableSpec.of(snap.state)
    sources = queries.Sources(entries=source if source is not None else snap.name)
    if kind == "visible":
        query = queries.visible(spec, target, sources, system_columns=system_columns)
    elif kind == "totals":
        request = queries.check_totals_request(spec, target, by, sum, count, avg, where)
        query = queries.totals(spec, target, sources, request)
    elif kind == "changes":
        query = queries.changes(spec, sources)
    else:
        raise InvalidArgumentError(f"unknown view kind {kind!r}; choose one of {list(KINDS)}")
    return queries.render(query, target)
