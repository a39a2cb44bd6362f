"""The embedded DuckDB engine: connections and raw-ledger relations over data files.

Connections never install or load extensions at run time (there may be no network). Local files
are scanned by DuckDB's own Parquet reader; files on S3 are scanned through a pyarrow dataset.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from ledger.changes import ChangeSet
from ledger.errors import InvalidPredicateError, MalformedSourceError, StorageError
from ledger.log.entries import FileMarker
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql import ident, idents
from ledger.sql.live import (
    expand_sql,
    latest_entries_sql,
    live_entries_sql,
    unmatched_marks_sql,
    visible_rows_sql,
)
from ledger.storage import Store

DuckDBConnection = duckdb.DuckDBPyConnection
Relation = duckdb.DuckDBPyRelation

# Errors of a query that is wrong for the data (bad predicate, unknown column, bad cast), as
# opposed to errors reading the data.
QUERY_ERRORS = (
    duckdb.BinderException,
    duckdb.ParserException,
    duckdb.CatalogException,
    duckdb.ConversionException,
)

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def connect() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection that never downloads extensions."""
    con = duckdb.connect(config=dict(_CONFIG))
    # Compute in UTC whatever the machine's zone: TIMESTAMPTZ values then come back as stored.
    con.execute("SET TimeZone = 'UTC'")
    return con


def query_over(sql: str, name: str, rows: pa.Table, failed: Callable[[str], Exception]) -> pa.Table:
    """``sql`` run over ``rows`` registered as ``name``; ``failed(reason)`` is raised when the
    engine refuses it or it fails on the rows."""
    with closing(connect()) as con:
        con.register(name, rows)
        try:
            result: pa.Table = con.sql(sql).to_arrow_table()
        except duckdb.Error as e:
            raise failed(str(e)) from e
    return result


def function_kinds() -> list[tuple[str, str]]:
    """Every function name DuckDB knows (lower case) with its kind: scalar, aggregate, table,
    table_macro, pragma, ..."""
    with connect() as con:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name), function_type FROM duckdb_functions()"
        ).fetchall()
    return [(str(name), str(kind)) for name, kind in rows]


def relation_batches(relation: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """A DuckDB relation's rows as Arrow batches, streamed; a relation that fails to compute
    raises MalformedSourceError."""
    try:
        yield from relation.to_arrow_reader(batch_rows)
    except duckdb.Error as e:
        raise MalformedSourceError(f"the DuckDB relation could not be read: {e}") from e


def scan_files(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
) -> duckdb.DuckDBPyRelation:
    """The raw entries of ``files`` as a relation with exactly ``schema``.

    Files written before a schema change lack new columns (read as NULL) or hold narrower types
    (cast up), so every column is projected to the table's current type.
    """
    if not files:
        return con.from_arrow(schema.empty_table())
    keys = [table_prefix + f.path for f in files]
    local = [store.local_path(k) for k in keys]
    if all(p is not None for p in local):
        # No hive partitioning: partition values live in the log, never as file columns.
        relation = con.read_parquet(
            [p for p in local if p is not None], union_by_name=True, hive_partitioning=False
        )
        present = set(relation.columns)
        projection = ", ".join(
            (
                f"CAST({ident(f.name)} AS {_duck_type(f.type)}) AS {ident(f.name)}"
                if f.name in present
                else f"CAST(NULL AS {_duck_type(f.type)}) AS {ident(f.name)}"
            )
            for f in schema
        )
        return relation.project(projection)
    dataset = pads.dataset(
        [store.fs_path(k) for k in keys],
        schema=schema,
        format="parquet",
        filesystem=store.filesystem,
    )
    return con.from_arrow(dataset)


def _duck_type(data_type: pa.DataType) -> str:
    from ledger.schema import arrow_to_sql

    return arrow_to_sql(data_type)


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Report a data file that could not be read as :class:`StorageError` (an ``OSError``).

    DuckDB wraps failures of its own reader and of Arrow sources (files on S3 are read through
    pyarrow) in its own exception types; callers should not need to know the engine.
    """
    try:
        yield
    except duckdb.Error as e:
        message = str(e)
        if isinstance(e, duckdb.IOException) or "IOError" in message:
            raise StorageError(f"{what}: a data file could not be read: {message}") from e
        raise


# --- the queries of read-modify-write transactions ---------------------------------------------


def live_rows(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    *,
    keys: pa.Table | None,
    predicate: str | None,
    latest_first: str | None = None,
) -> tuple[pa.Table, pa.Table]:
    """For the given keys (or every key), the visible row of each key and every live entry
    (matching ``predicate`` if given), one row per entry to cancel (see ledger.live).

    ``latest_first`` (an ORDER BY) switches to replacing semantics: a key's only live entry is
    its latest entry, if that is an insertion."""
    with closing(connect()) as con, storage_errors(f"reading {table_prefix.rstrip('/')!r}"):
        scan_files(con, store, table_prefix, files, schema).create_view("ledger_entries")
        source = "ledger_entries"
        if keys is not None:
            con.register("ledger_keys", keys)
            source = (
                f"(SELECT * FROM ledger_entries SEMI JOIN ledger_keys "
                f"USING ({idents(list(key_columns))}))"
            )
        floats = _float_columns(schema, value_columns) if latest_first is None else []
        live = (
            live_entries_sql(source, value_columns, floats)
            if latest_first is None
            else latest_entries_sql(source, key_columns, value_columns, latest_first)
        )
        if predicate is not None:
            live = f"SELECT * FROM ({live}) WHERE ({predicate})"
        con.execute(f"CREATE TEMP TABLE ledger_live AS {live}")
        latest = con.sql(visible_rows_sql("ledger_live", key_columns, value_columns, floats))
        marks = con.sql(expand_sql("ledger_live", value_columns))
        return latest.to_arrow_table(), marks.to_arrow_table()


def _float_columns(schema: pa.Schema, columns: Sequence[str]) -> list[str]:
    return [c for c in columns if pa.types.is_floating(schema.field(c).type)]


def entries_touch(
    store: Store,
    table_prefix: str,
    schema: pa.Schema,
    key_columns: Sequence[str],
    *,
    keys_files: Sequence[FileMarker],
    keys: pa.Table | None,
    predicate_files: Sequence[FileMarker],
    predicates: Sequence[str],
) -> bool:
    """Whether ``keys_files`` hold an entry of one of ``keys``, or ``predicate_files`` an
    insertion matching one of ``predicates``: the conflict test of a transaction."""
    with closing(connect()) as con, storage_errors(f"checking {table_prefix.rstrip('/')!r}"):
        if keys is not None and keys.num_rows and keys_files:
            scan_files(con, store, table_prefix, keys_files, schema).create_view("written")
            con.register("touched", keys)
            hit = con.sql(
                f"SELECT 1 FROM written SEMI JOIN touched "
                f"USING ({idents(list(key_columns))}) LIMIT 1"
            ).fetchall()
            if hit:
                return True
        if predicates and predicate_files:
            scan_files(con, store, table_prefix, predicate_files, schema).create_view("inserted")
            for predicate in predicates:
                hit = con.sql(
                    f"SELECT 1 FROM inserted WHERE {ident(DML_TYPE)} = 1 AND ({predicate}) LIMIT 1"
                ).fetchall()
                if hit:
                    return True
        return False


def stale_versions(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    rows: pa.Table,
    version_column: str,
    latest_first: str,
) -> pa.Table:
    """The rows whose version ranks below the version of their key's latest entry (by
    ``latest_first``, an ORDER BY; a delete mark counts): key columns, ``given`` and
    ``current``. A NULL version ranks below every other version."""
    keys, version = idents(list(key_columns)), ident(version_column)
    with closing(connect()) as con, storage_errors(f"reading {table_prefix.rstrip('/')!r}"):
        scan_files(con, store, table_prefix, files, schema).create_view("ledger_entries")
        con.register("ledger_rows", rows.select([*key_columns, version_column]))
        latest = (
            f"SELECT {keys}, {version} FROM ledger_entries SEMI JOIN ledger_rows USING ({keys}) "
            f"QUALIFY row_number() OVER (PARTITION BY {keys} ORDER BY {latest_first}) = 1"
        )
        return con.sql(
            f"SELECT {keys}, given.{version} AS given, latest.{version} AS current "
            f"FROM ledger_rows AS given JOIN ({latest}) AS latest USING ({keys}) "
            f"WHERE latest.{version} IS NOT NULL "
            f"AND (given.{version} IS NULL OR given.{version} < latest.{version})"
        ).to_arrow_table()


def anti_join(keys: pa.Table, found: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The rows of ``keys`` whose key is not in ``found``."""
    with closing(connect()) as con:
        con.register("wanted", keys)
        con.register("found", found.select(list(key_columns)))
        return con.sql(
            f"SELECT * FROM wanted ANTI JOIN found USING ({idents(list(key_columns))})"
        ).to_arrow_table()


def fill_missing(
    rows: pa.Table,
    latest: pa.Table,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    given: Mapping[str, pa.Array] | None = None,
) -> pa.Table:
    """Give columns missing from ``rows`` the values of the key's visible row (NULL if new).

    ``given`` maps a column some rows did not name to a mask, true where the row named it; the
    other rows take the visible row's value too. Rows keep their order.
    """
    partial = {c: m for c, m in (given or {}).items() if c in rows.column_names}
    missing = [c for c in value_columns if c not in rows.column_names or c in partial]
    if not missing:
        return rows
    current = _current_values(rows.select(list(key_columns)), latest, key_columns, missing)
    columns = []
    names = []
    for name in value_columns:
        if name in partial:
            given_values = rows.column(name).combine_chunks()
            current_values = current.column(name).combine_chunks().cast(given_values.type)
            columns.append(pc.if_else(partial[name], given_values, current_values))
        elif name in rows.column_names:
            columns.append(rows.column(name))
        else:
            columns.append(current.column(name))
        names.append(name)
    return pa.table(columns, names=names)


def _current_values(
    keys: pa.Table, latest: pa.Table, key_columns: Sequence[str], columns: Sequence[str]
) -> pa.Table:
    """``columns`` of the visible row of each key in ``keys`` (NULL for a new key), one row per
    key in the order of ``keys``."""
    position = "row_position"
    while position in keys.column_names:
        position = "_" + position
    numbered = keys.append_column(position, pa.array(range(keys.num_rows), pa.int64()))
    with closing(connect()) as con:
        con.register("given", numbered)
        con.register("current", latest.select([*key_columns, *columns]))
        return con.sql(
            f"SELECT {', '.join('current.' + ident(c) for c in columns)} "
            f"FROM given LEFT JOIN current USING ({idents(list(key_columns))}) "
            f"ORDER BY given.{ident(position)}"
        ).to_arrow_table()


def unmatched_marks(
    live: pa.Table, incoming: pa.Table, key_columns: Sequence[str], value_columns: Sequence[str]
) -> pa.Table:
    """The value tuples that ``incoming``'s delete marks cancel more often than they are live
    (in ``live``, one row per live entry, or inserted by ``incoming``), with the excess."""
    with closing(connect()) as con:
        con.register("live_entries", live)
        con.register("incoming_entries", incoming)
        return con.sql(
            unmatched_marks_sql("live_entries", "incoming_entries", key_columns, value_columns)
        ).to_arrow_table()


# --- the queries of merges and rewrites ---------------------------------------------------------

ENTRIES = "entries"  # the relation a merge or rewrite query reads


@contextmanager
def query_entries(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    sql: str,
    order_by: Sequence[str],
    batch_rows: int,
) -> Iterator[pa.RecordBatchReader]:
    """Run ``sql`` over the entries of ``files`` (the relation ``entries``), sorted by
    ``order_by``, and stream the result as record batches.

    Raises the engine's own errors for a query that does not fit the data (see QUERY_ERRORS)
    and :class:`StorageError` for a data file that cannot be read.
    """
    with closing(connect()) as con, storage_errors(f"merging {table_prefix.rstrip('/')!r}"):
        scan_files(con, store, table_prefix, files, schema).create_view(ENTRIES)
        # NULLS LAST, as pyarrow sorts the files appends write.
        order = ", ".join(f"{ident(c)} ASC NULLS LAST" for c in order_by)
        relation = con.sql(f"SELECT * FROM ({sql}) ORDER BY {order}")
        yield relation.to_arrow_reader(batch_rows)


def query_result_schema(sql: str, schema: pa.Schema) -> pa.Schema:
    """The schema ``sql`` returns over ``entries`` with ``schema`` (bound on no rows)."""
    with closing(connect()) as con:
        con.register(ENTRIES, schema.empty_table())
        return con.sql(sql).limit(0).to_arrow_table().schema


def query_changes_entries(
    store: Store, table_prefix: str, files: Sequence[FileMarker], schema: pa.Schema, sql: str
) -> bool:
    """Whether ``sql`` over the entries of ``files`` returns anything other than those entries
    (compared as multisets of rows over ``schema``'s columns, NULLs equal to NULLs)."""
    columns = idents(schema.names)
    given = f"SELECT {columns} FROM {ENTRIES}"
    returned = f"SELECT {columns} FROM ({sql})"
    with closing(connect()) as con, storage_errors(f"rewriting {table_prefix.rstrip('/')!r}"):
        scan_files(con, store, table_prefix, files, schema).create_view(ENTRIES)
        [(changed,)] = con.sql(
            f"SELECT EXISTS ({given} EXCEPT ALL {returned}) "
            f"OR EXISTS ({returned} EXCEPT ALL {given})"
        ).fetchall()
    return bool(changed)


def partition_values_matching(values: pa.Table, predicate: str) -> pa.Table:
    """The rows of ``values`` (one column per partition field) matching a SQL predicate.

    Raises :class:`InvalidPredicateError` when the predicate is not a boolean expression (DuckDB
    would accept ``WHERE 1``), and the engine's QUERY_ERRORS when it does not bind."""
    with closing(connect()) as con:
        con.register("partition_values", values)
        kind = con.sql(f"SELECT ({predicate}) FROM partition_values").types[0]
        if str(kind) != "BOOLEAN":
            raise InvalidPredicateError(
                f"predicate {predicate!r} is {kind}, not a condition (true or false)"
            )
        return con.sql(f"SELECT * FROM partition_values WHERE ({predicate})").to_arrow_table()


# --- the relations views read ---------------------------------------------------------------------


def bind_relations(
    con: duckdb.DuckDBPyConnection, relations: dict[str, duckdb.DuckDBPyRelation]
) -> dict[str, str]:
    """Make each relation readable by name in SQL on ``con`` (a temporary view under a fresh
    name, so several views on one connection never collide); returns the names."""
    names = {}
    for role, relation in relations.items():
        name = f"__ledger_{role}_{uuid.uuid4().hex[:12]}"
        relation.create_view(name, replace=True)
        names[role] = name
    return names


def change_entries(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    table_prefix: str,
    changes: ChangeSet,
    schema: pa.Schema,
) -> duckdb.DuckDBPyRelation:
    """The entries of a change set (see ledger.changes) with ``_commit_version`` and
    ``_commit_timestamp``; entries of removed files carry the opposite ``dml_type``."""
    columns = [f.name for f in schema]
    extra = pa.schema(
        [("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("ms", "UTC"))]
    )
    parts: list[duckdb.DuckDBPyRelation] = []
    if changes.written:
        commits = pa.table(
            {
                TRX_ID: pa.array(list(changes.commits), pa.int64()),
                "_commit_version": pa.array([v for v, _ in changes.commits.values()], pa.int64()),
                "_commit_timestamp": pa.array(
                    [ms for _, ms in changes.commits.values()], pa.timestamp("ms", "UTC")
                ),
            }
        )
        names = bind_relations(
            con,
            {
                "written": scan_files(con, store, table_prefix, changes.written, schema),
                "commits": con.from_arrow(commits),
            },
        )
        parts.append(
            con.sql(
                f"SELECT {', '.join('w.' + ident(c) for c in columns)}, "
                f'c."_commit_version", c."_commit_timestamp" '
                f"FROM {ident(names['written'])} AS w JOIN {ident(names['commits'])} AS c "
                f"USING ({ident(TRX_ID)})"
            )
        )
    system = {TRX_ID, TRX_SEQ, DML_TYPE}
    values = idents([c for c in columns if c not in system])
    for commit in changes.replaced:
        # Entries that cancel within the commit's removed and added files (an insertion and its
        # mark dropped together, a row a rewrite kept) change nothing and are left out; the
        # rest appear as many times as their net sign says.
        signed = []
        for markers, sign in ((commit.removed, -1), (commit.added, 1)):
            if markers:
                scanned = scan_files(con, store, table_prefix, list(markers), schema)
                signed.append(
                    scanned.project(
                        f"{values}, {ident(TRX_ID)}, {ident(TRX_SEQ)}, "
                        f"{sign} * {ident(DML_TYPE)} AS {ident(DML_TYPE)}"
                    )
                )
        if not signed:
            continue
        union = signed[0] if len(signed) == 1 else signed[0].union(signed[1])
        name = bind_relations(con, {"replaced": union})["replaced"]
        netted = con.sql(
            f"SELECT {values}, max({ident(TRX_ID)}) AS {ident(TRX_ID)}, "
            f"max({ident(TRX_SEQ)}) AS {ident(TRX_SEQ)}, sum({ident(DML_TYPE)}) AS __net "
            f"FROM {ident(name)} GROUP BY {values} HAVING sum({ident(DML_TYPE)}) <> 0"
        )
        netted_name = bind_relations(con, {"netted": netted})["netted"]
        projection = ", ".join(
            f"CAST(sign(__net) AS TINYINT) AS {ident(c)}" if c == DML_TYPE else ident(c)
            for c in columns
        )
        parts.append(
            con.sql(
                f'SELECT {projection}, CAST({commit.version} AS BIGINT) AS "_commit_version", '
                f'make_timestamptz({commit.timestamp_ms} * 1000) AS "_commit_timestamp" '
                f"FROM (SELECT *, unnest(range(CAST(abs(__net) AS BIGINT))) AS __copy "
                f"FROM {ident(netted_name)})"
            )
        )
    if not parts:
        empty = pa.schema([*schema, *extra]).empty_table()
        return con.from_arrow(empty)
    out = parts[0]
    for part in parts[1:]:
        out = out.union(part)
    return out


def check_condition(schema: pa.Schema, predicate: str, *, shown: str | None = None) -> None:
    """Raise :class:`InvalidPredicateError` unless ``predicate`` binds over rows of ``schema``
    as a condition (unknown functions, type errors and non-boolean expressions fail here,
    before any file is read). Messages quote ``shown`` (the predicate as the user wrote it,
    when ``predicate`` is a rendering of it), never the query built around it."""
    quoted = predicate if shown is None else shown
    with closing(connect()) as con:
        con.register("checked_rows", schema.empty_table())
        try:
            kind = con.sql(f"SELECT ({predicate}) FROM checked_rows").types[0]
        except QUERY_ERRORS as e:
            raise InvalidPredicateError(
                f"predicate {quoted!r} does not fit the table: {engine_reason(e)}"
            ) from e
        if str(kind) != "BOOLEAN":
            raise InvalidPredicateError(
                f"predicate {quoted!r} is {kind}, not a condition (true or false)"
            )


def engine_reason(error: BaseException) -> str:
    """DuckDB's reason for refusing a query, without the query text it quotes after ``LINE``
    (SQL the user never wrote)."""
    reason = str(error).split("\nLINE ", 1)[0]
    return reason.strip()
