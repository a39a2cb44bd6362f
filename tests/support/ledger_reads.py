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


# --- what each policy's generated views answer (the reference the merge invariant is checked
# against until views/ generates them; see docs/merges.md) ---------------------------------------


def policy_answer(table: Table, version: int | None = None) -> Any:
    """Everything a view of the table answers, in a comparable form, by the table's policy.

    collapsing and custom: visible rows; replacing: the latest entry per key unless a mark;
    dedup: visible rows after dropping repeats; aggregating: the rollup per group key.
    Plus, for every policy but aggregating, sign-weighted totals over every column (over the
    visible rows for replacing tables).
    """
    policy = dict(table.config["policy"])
    name = policy["name"]
    con = engine.connect()
    try:
        table.scan(version=version, con=con).create_view("raw")
        key = list(table.primary_key) or [ROW_ID]
        values = _value_columns(table)
        source = "raw"
        if name == "dedup":
            columns = list(policy.get("dedup_key") or [*key, "trx_id", "trx_seq"])
            if "dml_type" not in columns:
                columns.append("dml_type")
            con.execute(
                "CREATE TEMP VIEW deduped AS SELECT * FROM raw QUALIFY row_number() OVER "
                f"(PARTITION BY {idents(columns)} ORDER BY trx_id, trx_seq) = 1"
            )
            source = "deduped"
        if name == "aggregating":
            return _rollup(con, key, policy["measures"])
        if name == "replacing":
            order = "trx_id DESC, trx_seq DESC"
            if policy.get("version_column"):
                order = f"{idents([policy['version_column']])} DESC NULLS LAST, {order}"
            # Replacing merges drop superseded entries and their marks, so a replacing table's
            # totals are over its visible rows, not its signs.
            con.execute(
                f"CREATE TEMP TABLE latest AS SELECT {idents(values)}, dml_type FROM {source} "
                f"QUALIFY row_number() OVER (PARTITION BY {idents(key)} ORDER BY {order}) = 1"
            )
            con.execute("DELETE FROM latest WHERE dml_type = -1")
            visible = sorted(con.sql(f"SELECT {idents(values)} FROM latest").fetchall(), key=repr)
            return {"visible": visible, "totals": _totals(con, "latest", values)}
        else:
            con.execute(f"CREATE TEMP TABLE live AS {live_entries_sql(source, values)}")
            visible = sorted(con.sql(visible_rows_sql("live", key, values)).fetchall(), key=repr)
        return {"visible": visible, "totals": _totals(con, source, values)}
    finally:
        con.close()


def _totals(con: Any, source: str, values: list[str]) -> dict[str, Any]:
    """SUM, COUNT and AVG over the marked ledger, weighting each entry by its dml_type, as they
    would be over the visible rows: COUNT of nothing is 0, and SUM and AVG are NULL when no
    non-NULL value is visible (entries that cancel out leave nothing, whether or not a merge has
    removed them yet)."""
    out: dict[str, Any] = {
        "count": con.sql(
            f"SELECT CAST(coalesce(sum(dml_type), 0) AS BIGINT) FROM {source}"
        ).fetchall()[0][0]
    }
    for column in values:
        quoted = idents([column])
        present = f"coalesce(sum(dml_type * CAST({quoted} IS NOT NULL AS INT)), 0)"
        try:
            out[column] = con.sql(
                f"SELECT CASE WHEN {present} = 0 THEN NULL ELSE sum(dml_type * {quoted}) END, "
                f"sum(dml_type * {quoted}) / nullif({present}, 0) FROM {source}"
            ).fetchall()[0]
        except Exception:  # not a numeric column: its weighted count only
            out[column] = con.sql(f"SELECT CAST({present} AS BIGINT) FROM {source}").fetchall()[0]
    return out


def _rollup(con: Any, key: list[str], measures: dict[str, str]) -> list[tuple[Any, ...]]:
    selected = []
    for column, function in measures.items():
        quoted = idents([column])
        selected.append(
            f"coalesce(sum(dml_type * {quoted}), 0)"
            if function in ("sum", "count")
            else f"{function}({quoted})"
        )
    counts = [c for c, f in measures.items() if f == "count"]
    having = f" HAVING coalesce(sum(dml_type * {idents(counts[:1])}), 0) <> 0" if counts else ""
    rows = con.sql(
        f"SELECT {idents(key)}, {', '.join(selected)} FROM raw GROUP BY {idents(key)}{having}"
    ).fetchall()
    return sorted(rows, key=repr)
