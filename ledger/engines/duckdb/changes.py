"""Change entries on DuckDB: the entries a range of versions added or removed, stamped with the
version and time of their commit (see ledger.changes), by the queries of ``ledger.sql.changes``."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ledger.changes import ChangeSet
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations
from ledger.sql import ident, idents
from ledger.sql.changes import replaced_entries, written_entries
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import COMMIT_TIMESTAMP, COMMIT_VERSION, DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql.trees import render
from ledger.storage import Store

DUCKDB = DIALECTS["duckdb"]


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
    extra = pa.schema([(COMMIT_VERSION, pa.int64()), (COMMIT_TIMESTAMP, pa.timestamp("ms", "UTC"))])
    parts: list[duckdb.DuckDBPyRelation] = []
    if changes.written:
        names = bind_relations(
            con,
            {
                "written": scan_files(con, store, table_prefix, changes.written, schema),
                "commits": con.from_arrow(changes.commit_stamps()),
            },
        )
        query = written_entries(names["written"], names["commits"], columns)
        parts.append(con.sql(render(query, DUCKDB)))
    system = {TRX_ID, TRX_SEQ, DML_TYPE}
    values = idents([c for c in columns if c not in system])
    for commit in changes.replaced:
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
        query = replaced_entries(name, columns, commit.version, commit.timestamp_ms, DUCKDB)
        parts.append(con.sql(render(query, DUCKDB)))
    if not parts:
        empty = pa.schema([*schema, *extra]).empty_table()
        return con.from_arrow(empty)
    out = parts[0]
    for part in parts[1:]:
        out = out.union(part)
    return out
