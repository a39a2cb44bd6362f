"""The rows a publish writes, read from the ledger on the embedded engine: the whole view, or
the current rows of the keys a change set touches."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ledger.changes import ChangeSet
from ledger.engines.duckdb.changes import change_entries
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations
from ledger.pruning import prune_by_keys
from ledger.reads.visible import visible
from ledger.snapshot import Snapshot
from ledger.sql import ident, idents
from ledger.sql.dialects import DIALECTS
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, render
from ledger.sql.visible import visible as visible_tree
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb


def repeats_cross_keys(spec: TableSpec) -> bool:
    """Whether an entry of one key can be a repeat of another key's entry (dedup tables with
    their own dedup key), so that a key's rows depend on entries of other keys."""
    return not spec.policy.keys_independent


def all_rows(
    con: duckdb.DuckDBPyConnection, snap: Snapshot, spec: TableSpec, schema: pa.Schema
) -> pa.Table:
    """Every row of the view at ``snap``, in the published ``schema``."""
    relation = visible(snap, con, system_columns=spec.generated_row_id)
    name = bind_relations(con, {"rows": relation})["rows"]
    rows = con.sql(f"SELECT {idents(schema.names)} FROM {ident(name)}").to_arrow_table()
    return rows.cast(schema)


def changed_keys(
    con: duckdb.DuckDBPyConnection, snap: Snapshot, spec: TableSpec, found: ChangeSet
) -> pa.Table:
    """The distinct keys of the change set's entries: only their rows can have changed (an
    entry of one key never changes another key's rows, dedup keys aside)."""
    schema = file_schema(snap.state.schema, snap.state.config)
    entries = change_entries(con, snap.store, snap.prefix, found, schema)
    name = bind_relations(con, {"changes": entries})["changes"]
    keys = idents(list(spec.key_columns))
    return con.sql(f"SELECT DISTINCT {keys} FROM {ident(name)}").to_arrow_table()


def rows_of_keys(
    con: duckdb.DuckDBPyConnection,
    snap: Snapshot,
    spec: TableSpec,
    schema: pa.Schema,
    keys: pa.Table,
) -> pa.Table:
    """The view's current rows of ``keys``: the view over the entries of those keys only
    (files pruned by their key ranges), except where repeats cross keys (then the whole view,
    filtered)."""
    if keys.num_rows == 0:
        return schema.empty_table()
    using = idents(list(spec.key_columns))
    markers = snap.markers()
    by_key = not repeats_cross_keys(spec)
    if by_key:
        markers = prune_by_keys(markers, keys, spec.key_columns)
    entries = scan_files(
        con, snap.store, snap.prefix, markers, file_schema(snap.state.schema, snap.state.config)
    )
    names = bind_relations(con, {"entries": entries, "keys": con.from_arrow(keys)})
    source = names["entries"]
    if by_key:
        source = bind_relations(
            con,
            {
                "wanted": con.sql(
                    f"SELECT * FROM {ident(names['entries'])} "
                    f"SEMI JOIN {ident(names['keys'])} USING ({using})"
                )
            },
        )["wanted"]
    duckdb_dialect = DIALECTS["duckdb"]
    query = visible_tree(
        spec, duckdb_dialect, Sources(entries=source), system_columns=spec.generated_row_id
    )
    shown = bind_relations(con, {"rows": con.sql(render(query, duckdb_dialect))})["rows"]
    sql = f"SELECT {idents(schema.names)} FROM {ident(shown)}"
    if not by_key:
        sql += f" SEMI JOIN {ident(names['keys'])} USING ({using})"
    return con.sql(sql).to_arrow_table().cast(schema)
