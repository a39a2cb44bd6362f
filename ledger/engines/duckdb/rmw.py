"""The reads of read-modify-write on DuckDB: the live rows of given keys, the versions a write
would overwrite, the values a partial row leaves out, and delete marks that cancel nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.key_scan import (
    comparable_keys,
    distinct_integer_keys,
    holds_keys,
    key_entries,
)
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import DuckDBConnection, work_connection
from ledger.log.entries import FileMarker
from ledger.sql import ident, idents
from ledger.sql.dialects import DIALECTS
from ledger.sql.live import (
    expand_sql,
    latest_entries_sql,
    live_entries_sql,
    unmatched_marks_sql,
    visible_rows_sql,
)
from ledger.sql.names import DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql.rmw import stale_versions as stale_versions_tree
from ledger.sql.trees import order_from_text, render
from ledger.storage import Store


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
    marks_in_entry_order: bool = False,
) -> tuple[pa.Table, pa.Table]:
    """For the given keys (or every key), the visible row of each key and every live entry
    (matching ``predicate`` if given), one row per entry to cancel (see ledger.sql.live).

    The live entries (the marks to write) come in the order of the earliest insertion each
    cancels (by ``trx_id``, ``trx_seq``), except that without ``marks_in_entry_order`` the
    keys read by their values alone come first (below): across keys the order changes an
    answer only where keys are not independent (a dedup key several keys share).

    ``latest_first`` (an ORDER BY) switches to replacing semantics: a key's only live entry is
    its latest entry, if that is an insertion.

    Given keys, only their entries are read (:mod:`ledger.engines.duckdb.key_scan`); when each
    key has a single entry, an insertion, that entry is both its visible row and its one live
    entry, under either semantics, and no query runs. When the files hold no delete mark, only
    the key and value columns are read first (see :func:`_live_rows_of_insertions`)."""
    if (
        keys is not None
        and predicate is None
        and not marks_in_entry_order
        and _insertions_only(files)
    ):
        found = _live_rows_of_insertions(
            store, table_prefix, files, schema, key_columns, value_columns, keys, latest_first
        )
        if found is not None:
            return found
    return _live_rows_read(
        store,
        table_prefix,
        files,
        schema,
        key_columns,
        value_columns,
        keys=keys,
        predicate=predicate,
        latest_first=latest_first,
    )


def _live_rows_read(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    *,
    keys: pa.Table | None,
    predicate: str | None,
    latest_first: str | None,
) -> tuple[pa.Table, pa.Table]:
    """:func:`live_rows` from every column of the entries of ``keys`` (or of every entry)."""
    entries = None
    if keys is not None:
        entries = key_entries(store, table_prefix, files, schema, key_columns, keys)
    if entries is not None and predicate is None and _one_insertion_per_key(entries, key_columns):
        alone = entries.sort_by([(TRX_ID, "ascending"), (TRX_SEQ, "ascending")])
        alone = alone.select(list(value_columns))
        return alone, alone
    with closing(work_connection()) as con, storage_errors(f"reading {table_prefix.rstrip('/')!r}"):
        _bind_entries(con, entries, store, table_prefix, files, schema)
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


def _insertions_only(files: Sequence[FileMarker]) -> bool:
    """Whether ``files`` hold no delete mark (a file's ``dml_sum`` equals its rows exactly
    then, as every entry adds +1 or -1)."""
    return all(marker.dml_sum == marker.rows for marker in files)


def _live_rows_of_insertions(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    keys: pa.Table,
    latest_first: str | None,
) -> tuple[pa.Table, pa.Table] | None:
    """:func:`live_rows` of ``keys`` in files holding insertions only; None when the key types
    are not :func:`comparable_keys` (the caller reads and joins every column).

    A key with one insertion has that row as its visible row and its one live entry, under
    either semantics, so only the key and value columns are read: ``trx_id`` and ``trx_seq``
    (an eighth of a correction's decoding at 1% of a table's keys) only order a key's several
    entries. The keys found more than once are read again, every column, and go through the
    live-entries query; a key's rows never depend on another key's entries."""
    value_schema = pa.schema([schema.field(c) for c in value_columns])
    found = key_entries(store, table_prefix, files, value_schema, key_columns, keys)
    if found is None:
        return None
    repeated = _repeated_keys(found, key_columns)
    if not repeated.num_rows:
        return found, found
    lone = found.take(_rows_without_keys(found, repeated, key_columns))
    latest, marks = _live_rows_read(
        store,
        table_prefix,
        files,
        schema,
        key_columns,
        value_columns,
        keys=repeated,
        predicate=None,
        latest_first=latest_first,
    )
    return (
        pa.concat_tables([lone, latest.select(list(value_columns)).cast(value_schema)]),
        pa.concat_tables([lone, marks.select(list(value_columns)).cast(value_schema)]),
    )


def _repeated_keys(entries: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The keys (distinct, with the key columns' names) that ``entries`` holds more than once."""
    if distinct_integer_keys(entries.select(list(key_columns))):
        return entries.select(list(key_columns)).slice(0, 0)
    # Positional names: Arrow reads a name starting with "." as a nested field path.
    positional = [f"key{i}" for i in range(len(key_columns))]
    counts = (
        entries.select(list(key_columns))
        .rename_columns(positional)
        .group_by(positional)
        .aggregate([([], "count_all")])
    )
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    return repeated.select(positional).rename_columns(list(key_columns))


def _rows_without_keys(entries: pa.Table, keys: pa.Table, key_columns: Sequence[str]) -> pa.Array:
    """Positions (ascending) of the rows of ``entries`` whose key is not one of ``keys``; the
    join carries the keys and a position only (Arrow's join takes no nested payload)."""
    positional = [f"key{i}" for i in range(len(key_columns))]
    numbered = (
        entries.select(list(key_columns))
        .rename_columns(positional)
        .append_column("position", pa.array(range(entries.num_rows), pa.int64()))
    )
    kept = numbered.join(
        keys.select(list(key_columns)).rename_columns(positional),
        keys=positional,
        join_type="left anti",
    )
    return pa.array(np.sort(kept.column("position").to_numpy()), pa.int64())


def _bind_entries(
    con: DuckDBConnection,
    entries: pa.Table | None,
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
) -> None:
    """Name ``ledger_entries``: the entries already read, or else a scan of ``files``."""
    if entries is not None:
        con.register("ledger_entries", entries)
    else:
        con.register("ledger_entries", scan_files(con, store, table_prefix, files, schema))


def _one_insertion_per_key(entries: pa.Table, key_columns: Sequence[str]) -> bool:
    """Whether every key of ``entries`` has exactly one entry, an insertion."""
    if not entries.num_rows:
        return True
    if pc.min(entries.column(DML_TYPE)).as_py() != 1:
        return False
    distinct = distinct_integer_keys(entries.select(list(key_columns)))
    if distinct is not None:
        return distinct
    # Positional names: Arrow reads a name starting with "." as a nested field path.
    positional = [f"key{i}" for i in range(len(key_columns))]
    keys = entries.select(list(key_columns)).rename_columns(positional)
    return bool(keys.group_by(positional).aggregate([]).num_rows == entries.num_rows)


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
    if keys is not None and keys.num_rows and keys_files:
        held = holds_keys(store, table_prefix, keys_files, schema, key_columns, keys)
        if held is None:
            held = _scan_holds_keys(store, table_prefix, keys_files, schema, key_columns, keys)
        if held:
            return True
    if not (predicates and predicate_files):
        return False
    with (
        closing(work_connection()) as con,
        storage_errors(f"checking {table_prefix.rstrip('/')!r}"),
    ):
        con.register("inserted", scan_files(con, store, table_prefix, predicate_files, schema))
        for predicate in predicates:
            hit = con.sql(
                f"SELECT 1 FROM inserted WHERE {ident(DML_TYPE)} = 1 AND ({predicate}) LIMIT 1"
            ).fetchall()
            if hit:
                return True
        return False


def _scan_holds_keys(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    keys: pa.Table,
) -> bool:
    """:func:`entries_touch`'s key test by a scan and a join, for keys Arrow does not compare
    as SQL does."""
    with (
        closing(work_connection()) as con,
        storage_errors(f"checking {table_prefix.rstrip('/')!r}"),
    ):
        con.register("written", scan_files(con, store, table_prefix, files, schema))
        con.register("touched", keys)
        return bool(
            con.sql(
                f"SELECT 1 FROM written SEMI JOIN touched "
                f"USING ({idents(list(key_columns))}) LIMIT 1"
            ).fetchall()
        )


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
    row_keys = rows.select(list(key_columns))
    entries = key_entries(store, table_prefix, files, schema, key_columns, row_keys)
    with closing(work_connection()) as con, storage_errors(f"reading {table_prefix.rstrip('/')!r}"):
        _bind_entries(con, entries, store, table_prefix, files, schema)
        con.register("ledger_rows", rows.select([*key_columns, version_column]))
        order = order_from_text(latest_first, DIALECTS["duckdb"])
        query = stale_versions_tree(
            "ledger_entries", "ledger_rows", key_columns, version_column, order
        )
        return con.sql(render(query, DIALECTS["duckdb"])).to_arrow_table()


def anti_join(keys: pa.Table, found: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The rows of ``keys`` whose key is not in ``found``."""
    names = list(key_columns)
    types = [keys.schema.field(c).type for c in names]
    if keys.column_names == names and comparable_keys(types):
        # Arrow's join, without a connection; positional names as in _one_insertion_per_key.
        positional = [f"key{i}" for i in range(len(names))]
        found_keys = found.select(names).cast(keys.schema)
        missing = keys.rename_columns(positional).join(
            found_keys.rename_columns(positional), keys=positional, join_type="left anti"
        )
        return missing.rename_columns(names)
    with closing(work_connection()) as con:
        con.register("wanted", keys)
        con.register("found", found.select(names))
        return con.sql(
            f"SELECT * FROM wanted ANTI JOIN found USING ({idents(names)})"
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
    if comparable_keys(keys.schema.types):
        return _current_values_by_arrow(keys, latest, key_columns, columns)
    position = "row_position"
    while position in keys.column_names:
        position = "_" + position
    numbered = keys.append_column(position, pa.array(range(keys.num_rows), pa.int64()))
    with closing(work_connection()) as con:
        con.register("given", numbered)
        con.register("current", latest.select([*key_columns, *columns]))
        return con.sql(
            f"SELECT {', '.join('current.' + ident(c) for c in columns)} "
            f"FROM given LEFT JOIN current USING ({idents(list(key_columns))}) "
            f"ORDER BY given.{ident(position)}"
        ).to_arrow_table()


def _current_values_by_arrow(
    keys: pa.Table, latest: pa.Table, key_columns: Sequence[str], columns: Sequence[str]
) -> pa.Table:
    """:func:`_current_values` by Arrow's join, without a connection. Positional names, as in
    :func:`_one_insertion_per_key`."""
    on = [f"key{i}" for i in range(len(key_columns))]
    values = [f"value{i}" for i in range(len(columns))]
    numbered = keys.select(list(key_columns)).rename_columns(on)
    numbered = numbered.append_column("position", pa.array(range(keys.num_rows), pa.int64()))
    current = pa.table(
        [
            *(latest.column(c).cast(keys.schema.field(c).type) for c in key_columns),
            *(latest.column(c) for c in columns),
        ],
        names=[*on, *values],
    )
    joined = numbered.join(current, keys=on, join_type="left outer").sort_by("position")
    return pa.table([joined.column(v) for v in values], names=list(columns))


def unmatched_marks(
    live: pa.Table, incoming: pa.Table, key_columns: Sequence[str], value_columns: Sequence[str]
) -> pa.Table:
    """The value tuples that ``incoming``'s delete marks cancel more often than they are live
    (in ``live``, one row per live entry, or inserted by ``incoming``), with the excess."""
    with closing(work_connection()) as con:
        con.register("live_entries", live)
        con.register("incoming_entries", incoming)
        floats = _float_columns(incoming.schema, value_columns)
        return con.sql(
            unmatched_marks_sql(
                "live_entries", "incoming_entries", key_columns, value_columns, floats
            )
        ).to_arrow_table()


def unmatched_marks_of_files(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    *,
    keys_files: Sequence[FileMarker],
) -> pa.Table:
    """:func:`unmatched_marks` over every entry of ``files`` whose key has an entry in
    ``keys_files``: the marks of those keys that cancel no insertion among them (a table's
    entries after a rewrite, whose query may have dropped or changed what a mark cancels)."""
    with closing(work_connection()) as con, storage_errors(f"reading {table_prefix.rstrip('/')!r}"):
        keys = idents(list(key_columns))
        con.register("keys_entries", scan_files(con, store, table_prefix, keys_files, schema))
        con.register("touched_keys", con.sql(f"SELECT DISTINCT {keys} FROM keys_entries"))
        con.register("all_entries", scan_files(con, store, table_prefix, files, schema))
        keyed = f"SELECT * FROM all_entries SEMI JOIN touched_keys USING ({keys})"
        con.register("incoming_entries", con.sql(keyed))
        values = idents(list(value_columns))
        con.register("live_entries", con.sql(f"SELECT {values} FROM all_entries WHERE false"))
        floats = _float_columns(schema, value_columns)
        return con.sql(
            unmatched_marks_sql(
                "live_entries", "incoming_entries", key_columns, value_columns, floats
            )
        ).to_arrow_table()
