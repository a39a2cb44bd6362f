"""Tables of every built-in merge policy, with several files per partition, written by the
embedded engine: what the views and merge suites read and merge on each engine."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import ledger
from ledger.schema import ROW_ID
from tests.support.arrow_data import rows
from tests.support.twins import raw


def dec(text: str) -> Decimal:
    return Decimal(text)


POLICY_SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "v": "BIGINT", "n": "BIGINT", "d": "DECIMAL(10,2)"}
AGGREGATE_SCHEMA = {"k": "BIGINT", "v": "BIGINT", "n": "BIGINT", "d": "DECIMAL(10,2)"}
POLICY_TABLES = ["collapsing", "collapsing-no-key", "replacing", "dedup", "aggregating"]


def policy_table(wh: ledger.Warehouse, kind: str) -> ledger.Table:
    """A table of ``kind`` with several files per bucket(2, k) partition, written embedded."""
    if kind == "aggregating":
        table = wh.create_table(
            kind,
            AGGREGATE_SCHEMA,
            primary_key="k",
            partition_by="bucket(2, k)",
            policy={"name": "aggregating", "measures": {"v": "sum", "n": "count", "d": "sum"}},
        )
        table.insert(rows("k v n d", *[(k % 5, k, 1, dec(f"{k}.25")) for k in range(8)]))
        table.insert(rows("k v n d", *[(k % 3, -k, 1, None) for k in range(6)]))
        # A correction: retract a row inserted before and book its replacement.
        table.append_entries(
            rows("k v n d dml_type", (1, 1, 1, dec("1.25"), -1), (1, 7, 1, None, 1))
        )
        return table
    options: dict[str, Any] = {"primary_key": "k", "partition_by": "bucket(2, k)"}
    if kind == "collapsing-no-key":
        options = {"primary_key": None, "partition_by": "bucket(2, v)"}
    elif kind == "replacing":
        options["policy"] = {"name": "replacing", "version_column": "v"}
    elif kind == "dedup":
        options["policy"] = {"name": "dedup", "dedup_key": ["v"]}
    table = wh.create_table(kind, POLICY_SCHEMA, **options)
    events = [(k % 6, "ab"[k % 2], k, 1, dec(f"{k}.50")) for k in range(9)]
    table.insert(rows("k g v n d", *events[:6]))
    table.insert(rows("k g v n d", *events[3:]))  # events 3-5 loaded twice
    if kind == "collapsing-no-key":
        ids = sorted(r[ROW_ID] for r in raw(table) if r["dml_type"] == 1)
        table.update(rows(f"{ROW_ID} n", (ids[0], 5), (ids[4], 6)))
        table.delete(rows(ROW_ID, (ids[1],)))
        table.insert(rows("g v n", ("c", 20, 2)))
        return table
    table.upsert(rows("k g v n", (1, "c", 20, 2), (7, "c", 21, 3)))
    table.update(rows("k d", (2, dec("-2.00"))))
    table.delete([3])
    table.insert(rows("k g v n d", *events[:2]))
    return table
