"""Merges and rewrites on DuckDB: a merge policy's or a rewrite's query (DuckDB SQL over the
relation :data:`~ledger.sql.names.ENTRIES`) run over the entries of some files."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager

import duckdb
import pyarrow as pa
from sqlglot import exp

from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import read_sessions, work_connection
from ledger.log.entries import FileMarker
from ledger.schema import arrow_to_sql
from ledger.sql import ident, idents
from ledger.sql.names import (
    ENTRIES,
    ENTRIES_OF_INSERTION_FILES,
    ENTRIES_OF_MARK_FILES,
    TRX_ID,
    TRX_SEQ,
)
from ledger.storage import Store

# DuckDB's Parquet writer cuts row groups at multiples of its vector size.
COPY_ROW_GROUP_STEP = 2048
# The relation of the files a rewrite copies as they are, beside the query's result.
PASSING = "__ledger_passing_entries"


def register_entries(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
) -> None:
    """Register the entries of ``files`` as :data:`ENTRIES`, and split by file as
    :data:`ENTRIES_OF_INSERTION_FILES` (files holding an insertion) and
    :data:`ENTRIES_OF_MARK_FILES` (files holding delete marks only, told by their markers),
    the relations a merge policy's query may read instead (MergeContext.split_sources)."""
    marks_only = [m for m in files if m.rows and m.dml_sum == -m.rows]
    entries = scan_files(con, store, table_prefix, files, schema)
    con.register(ENTRIES, entries)
    if not marks_only:  # the split is the whole and nothing: no footer is read twice
        con.register(ENTRIES_OF_INSERTION_FILES, entries)
        con.register(ENTRIES_OF_MARK_FILES, schema.empty_table())
        return
    with_insertions = [m for m in files if not (m.rows and m.dml_sum == -m.rows)]
    con.register(
        ENTRIES_OF_INSERTION_FILES, scan_files(con, store, table_prefix, with_insertions, schema)
    )
    con.register(ENTRIES_OF_MARK_FILES, scan_files(con, store, table_prefix, marks_only, schema))


@contextmanager
def rewrite_entries(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    sql: str,
    order_by: Sequence[str],
    batch_rows: int,
    passing: Sequence[FileMarker] = (),
) -> Iterator[pa.RecordBatchReader]:
    """Run ``sql`` over the entries of ``files`` (the relation ``entries``), add the entries of
    ``passing`` as they are, sort by ``order_by``, and stream the result as record batches.

    Raises the engine's own errors for a query that does not fit the data (see QUERY_ERRORS)
    and :class:`StorageError` for a data file that cannot be read.
    """
    with closing(work_connection()) as con, storage_errors(f"merging {table_prefix.rstrip('/')!r}"):
        register_entries(con, store, table_prefix, files, schema)
        if passing:
            con.register(PASSING, scan_files(con, store, table_prefix, passing, schema))
            sql = with_passing(sql, schema)
        # NULLS LAST, as pyarrow sorts the files appends write.
        order = ", ".join(f"{ident(c)} ASC NULLS LAST" for c in order_by)
        relation = con.sql(f"SELECT * FROM ({sql}) ORDER BY {order}")
        yield relation.to_arrow_reader(batch_rows)


def with_passing(sql: str, schema: pa.Schema) -> str:
    """``sql``'s result followed by the entries of the relation :data:`PASSING`, in
    ``schema``'s columns."""
    columns = idents(schema.names)
    return f"SELECT {columns} FROM ({sql}) UNION ALL SELECT {columns} FROM {ident(PASSING)}"


def copy_entries(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    sql: str,
    order_by: Sequence[str],
    path: str,
    row_group_rows: int,
    passing: Sequence[FileMarker] = (),
) -> bool:
    """Run ``sql`` over the entries of ``files`` and write its result with the entries of
    ``passing`` as they are, sorted by ``order_by``, into the local Parquet file ``path`` with
    DuckDB's own writer (snappy, row groups of ``row_group_rows``, a multiple of
    :data:`COPY_ROW_GROUP_STEP`), which encodes row groups on every core while the sort still
    runs. The columns are written in ``schema``'s order.

    Returns False, writing nothing, when the result's columns are not exactly ``schema``'s
    names and types: converting them is the caller's (whose casts refuse what DuckDB's would
    round). Raises the engine's own errors for a query that does not fit the data and
    :class:`StorageError` for a data file that cannot be read.
    """
    # A child connection of the store's long-lived database: opening and closing a database
    # of our own (its threads, its buffers) costs tens of milliseconds a merge. Children share
    # the database's views, so ``entries`` is registered: visible to this child only.
    cursor = read_sessions(store).cursor()
    with closing(cursor) as con, storage_errors(f"merging {table_prefix.rstrip('/')!r}"):
        # The result's types, bound over no rows: the files' relation has exactly ``schema``'s
        # types, and binding over it would read every file's footer once more.
        for relation in (ENTRIES, ENTRIES_OF_INSERTION_FILES, ENTRIES_OF_MARK_FILES):
            con.register(relation, schema.empty_table())
        returned = con.sql(sql).limit(0).to_arrow_table().schema
        if len(returned) != len(schema) or any(
            returned.get_field_index(f.name) < 0 or returned.field(f.name).type != f.type
            for f in schema
        ):
            return False
        register_entries(con, store, table_prefix, files, schema)
        if passing:
            con.register(PASSING, scan_files(con, store, table_prefix, passing, schema))
            sql = with_passing(sql, schema)
        con.execute(_copy_statement(schema, sql, order_by, path, row_group_rows))
    return True


def _copy_statement(
    schema: pa.Schema, sql: str, order_by: Sequence[str], path: str, row_group_rows: int
) -> str:
    columns = idents(schema.names)
    # DuckDB writes a column as REQUIRED when its statistics prove it holds no NULL; data files
    # declare every column nullable (docs/format.md 7), so a branch that can hold NULLs (and
    # never returns a row: random() < 1) joins the result.
    nulls = ", ".join(f"CAST(NULL AS {arrow_to_sql(f.type)}) AS {ident(f.name)}" for f in schema)
    # NULLS LAST, as pyarrow sorts the files appends write.
    order = ", ".join(f"{ident(c)} ASC NULLS LAST" for c in order_by)
    target = exp.Literal.string(path).sql(dialect="duckdb")
    return (
        f"COPY (SELECT {columns} FROM (SELECT {columns} FROM ({sql}) "
        f"UNION ALL SELECT {nulls} WHERE random() < 0) ORDER BY {order}) "
        f"TO {target} (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE {row_group_rows})"
    )


def query_result_schema(sql: str, schema: pa.Schema) -> pa.Schema:
    """The schema ``sql`` returns over ``entries`` with ``schema`` (bound on no rows)."""
    with closing(work_connection()) as con:
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
    with (
        closing(work_connection()) as con,
        storage_errors(f"rewriting {table_prefix.rstrip('/')!r}"),
    ):
        con.register(ENTRIES, scan_files(con, store, table_prefix, files, schema))
        [(changed,)] = con.sql(
            f"SELECT EXISTS ({given} EXCEPT ALL {returned}) "
            f"OR EXISTS ({returned} EXCEPT ALL {given})"
        ).fetchall()
    return bool(changed)


def entries_not_kept_once(
    store: Store,
    table_prefix: str,
    inputs: Sequence[FileMarker],
    outputs: Sequence[FileMarker],
    schema: pa.Schema,
) -> tuple[int, int]:
    """How the entries of ``outputs`` (a rewrite's result) fail to be entries of ``inputs``
    kept at most once: the number of repeated ``(trx_id, trx_seq)`` pairs, and the number of
    entries whose pair no input entry has (NULL pairs are left to the row checks)."""
    pair = idents([TRX_ID, TRX_SEQ])
    known = f"{ident(TRX_ID)} IS NOT NULL AND {ident(TRX_SEQ)} IS NOT NULL"
    with (
        closing(work_connection()) as con,
        storage_errors(f"rewriting {table_prefix.rstrip('/')!r}"),
    ):
        con.register("given_entries", scan_files(con, store, table_prefix, inputs, schema))
        con.register("returned_entries", scan_files(con, store, table_prefix, outputs, schema))
        [(repeated, foreign)] = con.sql(
            f"SELECT (SELECT count(*) - count(DISTINCT ({pair})) FROM returned_entries "
            f"WHERE {known}), (SELECT count(*) FROM returned_entries "
            f"ANTI JOIN given_entries USING ({pair}) WHERE {known})"
        ).fetchall()
    return int(repeated or 0), int(foreign or 0)
