"""Reading a table's meaning for assertions: live entries, visible rows, sign sums per key.

Built on the same live-entry SQL the writes use, over the raw ledger relation, so the tests check
the ledger's answers against an oracle that never touches a ledger.
"""

from __future__ import annotations

from typing import Any

from ledger import Table
from ledger.engines import duckdb as engine
from ledger.live import live_entries_sql, visible_rows_sql
from ledger.schema import ROW_ID
from ledger.sql import idents


def _value_columns(table: Table) -> list[str]:
    extra = [ROW_ID] if table.config["generated_row_id"] else []
    return [*table.schema, *extra]


def visible_rows(table: Table, version: int | None = None) -> list[tuple[Any, ...]]:
    """The latest live row of every key, sorted, as tuples in schema order."""
    con = engine.connect()
    try:
        table.scan(version=version, con=con).create_view("entries")
        key = list(table.primary_key) or [ROW_ID]
        values = _value_columns(table)
        con.execute(f"CREATE TEMP TABLE live AS {live_entries_sql('entries', values)}")
        sql = visible_rows_sql("live", key, values)
        return sorted(con.sql(sql).fetchall(), key=repr)
    finally:
        con.close()


def sign_sums(table: Table, version: int | None = None) -> dict[tuple[Any, ...], int]:
    """sum(dml_type) per key, keys with a zero sum left out."""
    con = engine.connect()
    try:
        rel = table.scan(version=version, con=con)
        key = list(table.primary_key) or [ROW_ID]
        rows = rel.aggregate(
            f"{idents(key)}, CAST(sum(dml_type) AS BIGINT) AS s", idents(key)
        ).fetchall()
        return {tuple(r[:-1]): int(r[-1]) for r in rows if r[-1] != 0}
    finally:
        con.close()


def entry_count(table: Table, version: int | None = None) -> int:
    """Number of raw entries (rows in data files) at a version."""
    con = engine.connect()
    try:
        return int(table.scan(version=version, con=con).aggregate("count(*)").fetchall()[0][0])
    finally:
        con.close()
