"""Twin tables: one written through the engine under test, one through the embedded API.

Every check compares what an engine's write did with what the embedded DuckDB engine does on a
twin, through answers that never run the engine under test: ``views.visible``/``views.totals``
and the raw ledger (``table.snapshot().scan()``). On the DuckDB engine the twins must simply
agree; the literal expectations of each test are what it checks there.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

import ledger
import views
from ledger.schema import ROW_ID
from tests.support.engines import Engine
from tests.support.engines import sorted_rows as norm

# The twins' default columns: a key, a group, a number and a decimal.
SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "x": "BIGINT", "d": "DECIMAL(10,2)"}


def visible(table: ledger.Table | ledger.Snapshot, **kw: Any) -> list[tuple[Any, ...]]:
    return norm(views.visible(table, **kw).fetchall())


def totals(table: ledger.Table, **kw: Any) -> list[tuple[Any, ...]]:
    return norm(views.totals(table, **kw).fetchall())


def raw(table: ledger.Table, version: int | None = None) -> list[dict[str, Any]]:
    """The raw ledger (system columns included) as the embedded engine scans it."""
    rel = table.snapshot(version).scan()
    return rel.to_arrow_table().to_pylist()


def raw_tuples(entries: list[dict[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    return norm(tuple(e[c] for c in columns) for e in entries)


def footprint(table: ledger.Table) -> tuple[int, frozenset[str]]:
    """The latest log version and every object under the table's ``_data/``."""
    keys = frozenset(o.key for o in table.store.list(f"{table.prefix}_data/"))
    return table.refresh().version, keys


def assert_same_meaning(engine_side: ledger.Table, embedded_side: ledger.Table) -> None:
    """Same visible rows and same totals (by group, sums, averages) on both tables, read by the
    embedded engine."""
    assert visible(engine_side) == visible(embedded_side)
    assert visible(engine_side, system_columns=False) != [] or visible(embedded_side) == []
    by_group = {"by": "g", "sum": ["x", "d"], "avg": "x"}
    assert totals(engine_side, **by_group) == totals(embedded_side, **by_group)
    assert totals(engine_side, sum=["x", "d"]) == totals(embedded_side, sum=["x", "d"])


def assert_entry_order(table: ledger.Table, read_modify_write: set[int]) -> None:
    """``trx_seq`` is unique in every transaction; in the commits of ``read_modify_write``
    (trx_ids of upserts/updates), every delete mark of a key comes before its insertion."""
    key = list(table.primary_key) or [ROW_ID]
    seen: dict[int, set[int]] = defaultdict(set)
    by_key: dict[tuple[Any, ...], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for e in raw(table):
        assert e["trx_seq"] not in seen[e["trx_id"]], f"trx_seq repeated in {e}"
        seen[e["trx_id"]].add(e["trx_seq"])
        if e["trx_id"] in read_modify_write:
            by_key[(e["trx_id"], *(e[k] for k in key))][e["dml_type"]].append(e["trx_seq"])
    for where, signs in by_key.items():
        if signs[-1] and signs[1]:
            assert max(signs[-1]) < min(signs[1]), f"a mark follows an insertion at {where}"
    for trx, numbers in seen.items():
        assert sorted(numbers) == list(range(len(numbers))), f"trx {trx}: gaps in trx_seq"


def twins(
    where: ledger.Warehouse | Path, schema: dict[str, str] | None = None, **options: Any
) -> tuple[ledger.Table, ledger.Table]:
    """Two empty tables of one definition in a warehouse (or in ``where/wh``): ``s`` written by
    the engine under test, ``e`` by the embedded engine's own API, the reference."""
    wh = where if isinstance(where, ledger.Warehouse) else ledger.connect(str(where / "wh"))
    return (
        wh.create_table("s", schema or SCHEMA, **options),
        wh.create_table("e", schema or SCHEMA, **options),
    )


def on_both(engine: Engine, s: Any, e: Any, operation: str, data: pa.Table) -> tuple[Any, Any]:
    """Run one write through ``engine`` on ``s`` and through the embedded API on ``e``."""
    return engine.write(s, operation, data), getattr(e, operation)(data)


def same_commit(pair: tuple[Any, Any]) -> None:
    """The engine's commit and the reference's have the same version, trx_id and counts."""
    by_engine, embedded = pair
    assert (by_engine.version, by_engine.trx_id, by_engine.inserted, by_engine.deleted) == (
        embedded.version,
        embedded.trx_id,
        embedded.inserted,
        embedded.deleted,
    )
