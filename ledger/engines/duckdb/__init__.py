"""The embedded DuckDB engine (see :class:`ledger.engines.base.Engine`).

The modules are the engine's roles, named as in the Spark engine: ``session`` (connections),
``scan`` (data files -> relation), ``query`` (run a tree or SQL), ``write`` (rows -> files),
``rewrite`` (merges and rewrites), ``rmw`` (the reads of read-modify-write), ``changes``
(change entries) and ``errors`` (DuckDB's errors as the ledger's). Only this package imports
``duckdb`` at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
from sqlglot import exp

from ledger.engines.base import Engine
from ledger.engines.duckdb import changes, errors, query, rewrite, scan, write

if TYPE_CHECKING:
    from ledger.changes import ChangeSet
    from ledger.log.entries import FileMarker
    from ledger.storage import Store
    from ledger.writer import DataWriter


class DuckDBEngine:
    """DuckDB as an :class:`~ledger.engines.base.Engine`: sessions are connections (from
        :func:`ledger.engines.duckdb.session.connect`), relations are DuckDB relations. Each method
    calls its module's function when it runs, so wrapping that function (to time or watch it)
    wraps the engine's method too.

        >>> from contextlib import closing
        >>> from ledger.engines.duckdb.session import connect
        >>> from sqlglot import select
        >>> with closing(connect()) as con:
        ...     ENGINE.run(con, select("41 + 1 AS answer")).fetchall()
        [(42,)]
    """

    name = "duckdb"
    query_errors: tuple[type[Exception], ...] = errors.QUERY_ERRORS

    def scan(
        self,
        session: duckdb.DuckDBPyConnection,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
    ) -> duckdb.DuckDBPyRelation:
        return scan.scan_files(session, store, table_prefix, files, schema)

    def run(
        self, session: duckdb.DuckDBPyConnection, tree: exp.Expression
    ) -> duckdb.DuckDBPyRelation:
        return query.run(session, tree)

    def write_entries(
        self, entries: duckdb.DuckDBPyRelation, writer: DataWriter
    ) -> list[FileMarker]:
        return write.write_entries(entries, writer)

    def rewrite_files(
        self,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
        sql: str,
        order_by: Sequence[str],
        batch_rows: int,
    ) -> AbstractContextManager[pa.RecordBatchReader]:
        return rewrite.rewrite_entries(
            store, table_prefix, files, schema, sql, order_by, batch_rows
        )

    def change_entries(
        self,
        session: duckdb.DuckDBPyConnection,
        store: Store,
        table_prefix: str,
        change_set: ChangeSet,
        schema: pa.Schema,
    ) -> duckdb.DuckDBPyRelation:
        return changes.change_entries(session, store, table_prefix, change_set, schema)


ENGINE: Engine[duckdb.DuckDBPyConnection, duckdb.DuckDBPyRelation] = DuckDBEngine()
