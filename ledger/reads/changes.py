"""The change feed of a table between two versions: the tree of :mod:`ledger.sql.changes` over
the entries the log says were added (and the rows dropped partitions removed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.changes import change_set
from ledger.engines.duckdb.changes import change_entries
from ledger.engines.duckdb.session import bind_relations
from ledger.sql.changes import changes as changes_tree
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import ENTRIES
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, render
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb

    from ledger.table import Table

DUCKDB = DIALECTS["duckdb"]


def changes(
    table: Table,
    since_version: int,
    until_version: int | None,
    con: duckdb.DuckDBPyConnection,
) -> duckdb.DuckDBPyRelation:
    """Every entry committed to ``table`` after ``since_version`` (up to ``until_version``,
    default the latest) with its change type, as a lazy relation on ``con``."""
    found = change_set(table, since_version, until_version)
    snap = table.snapshot(found.until)
    spec = TableSpec.of(snap.state)
    schema = file_schema(snap.state.schema, snap.state.config)
    entries = change_entries(con, snap.store, snap.prefix, found, schema)
    names = bind_relations(con, {ENTRIES: entries})
    query = changes_tree(spec, Sources(entries=names[ENTRIES]))
    return con.sql(render(query, DUCKDB))
