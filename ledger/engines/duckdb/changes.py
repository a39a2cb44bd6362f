"""Change entries on DuckDB: the entries a range of versions added or removed, stamped with the
version and time of their commit (see ledger.changes)."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ledger.changes import ChangeSet
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations
from ledger.sql import ident, idents
from ledger.sql.names import COMMIT_TIMESTAMP, COMMIT_VERSION, COPY, DML_TYPE, NET, TRX_ID, TRX_SEQ
from ledger.storage import Store


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
    version, timestamp = ident(COMMIT_VERSION), ident(COMMIT_TIMESTAMP)
    extra = pa.schema([(COMMIT_VERSION, pa.int64()), (COMMIT_TIMESTAMP, pa.timestamp("ms", "UTC"))])
    parts: list[duckdb.DuckDBPyRelation] = []
    if changes.written:
        commits = pa.table(
            {
                TRX_ID: pa.array(list(changes.commits), pa.int64()),
                COMMIT_VERSION: pa.array([v for v, _ in changes.commits.values()], pa.int64()),
                COMMIT_TIMESTAMP: pa.array(
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
                f"c.{version}, c.{timestamp} "
                f"FROM {ident(names['written'])} AS w JOIN {ident(names['commits'])} AS c "
                f"USING ({ident(TRX_ID)})"
            )
        )
    system = {TRX_ID, TRX_SEQ, DML_TYPE}
    values = idents([c for c in columns if c not in system])
    net, copy = ident(NET), ident(COPY)
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
            f"max({ident(TRX_SEQ)}) AS {ident(TRX_SEQ)}, sum({ident(DML_TYPE)}) AS {net} "
            f"FROM {ident(name)} GROUP BY {values} HAVING sum({ident(DML_TYPE)}) <> 0"
        )
        netted_name = bind_relations(con, {"netted": netted})["netted"]
        projection = ", ".join(
            f"CAST(sign({net}) AS TINYINT) AS {ident(c)}" if c == DML_TYPE else ident(c)
            for c in columns
        )
        parts.append(
            con.sql(
                f"SELECT {projection}, CAST({commit.version} AS BIGINT) AS {version}, "
                f"make_timestamptz({commit.timestamp_ms} * 1000) AS {timestamp} "
                f"FROM (SELECT *, unnest(range(CAST(abs({net}) AS BIGINT))) AS {copy} "
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
