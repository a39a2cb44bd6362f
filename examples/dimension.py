"""A replace-on-merge dimension table joined to a fact ledger with plain SQL.

Run it with ``.venv/bin/python examples/dimension.py`` (a temporary warehouse; pass a folder as
the first argument to keep it).

``customers`` uses the replacing policy with ``updated_at`` as its version column: a new
version of a customer is a plain ``insert`` (a blind append: no read, no delete mark, never a
conflict), and the visible row of a key is its entry with the latest ``updated_at``, whatever
order the versions arrived in. A merge keeps only that entry per key in the files. ``orders``
is an ordinary (collapsing) fact ledger. ``views.connect(warehouse)`` gives one DuckDB
connection where ``customers`` and ``orders`` are the visible rows (and ``*_ledger`` the raw
entries), so revenue per tier is one join; its answer is the same before and after the merge.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from decimal import Decimal
from typing import Any

import duckdb

import ledger
import views

CUSTOMER_COLUMNS = ("customer_id", "name", "tier", "city", "updated_at")


def _at(month: int) -> dt.datetime:
    return dt.datetime(2026, month, 1, 9, 0)


# Each batch is one insert (one commit, one data file), in the order the feed delivers them.
CUSTOMER_BATCHES = [
    [
        (1, "Ada", "bronze", "Paris", _at(1)),
        (2, "Brian", "silver", "Lyon", _at(1)),
        (3, "Chloe", "bronze", "Nice", _at(1)),
        (4, "Dmitri", "gold", "Lille", _at(1)),
    ],
    [(1, "Ada", "silver", "Paris", _at(3)), (3, "Chloe", "bronze", "Marseille", _at(3))],
    [(1, "Ada", "gold", "Paris", _at(6)), (2, "Brian", "bronze", "Lyon", _at(6))],
    # A late delivery of an older version: its updated_at is earlier than Chloe's current
    # version, so it does not replace it (insertion order does not matter).
    [(3, "Chloe", "silver", "Nice", _at(2))],
    [(4, "Dmitri", "gold", "Berlin", _at(9)), (5, "Eve", "silver", "Paris", _at(9))],
]
ORDERS = [
    (101, 1, Decimal("120.00")),
    (102, 2, Decimal("80.00")),
    (103, 1, Decimal("35.50")),
    (104, 3, Decimal("200.00")),
    (105, 4, Decimal("999.99")),
    (106, 5, Decimal("42.00")),
    (107, 2, Decimal("15.25")),
    (108, 4, Decimal("10.00")),
]
CANCELLED_ORDER = 108

REVENUE_PER_TIER = """
    SELECT c.tier, count(*) AS orders, sum(o.amount) AS revenue
    FROM orders AS o JOIN customers AS c USING (customer_id)
    GROUP BY c.tier ORDER BY c.tier
"""
CUSTOMERS = "SELECT * FROM customers ORDER BY customer_id"
ENTRIES_PER_CUSTOMER = """
    SELECT customer_id, count(*) AS entries FROM customers_ledger
    GROUP BY customer_id ORDER BY customer_id
"""


def title(text: str) -> None:
    print(f"\n=== {text} ".ljust(100, "="))


def show(caption: str, relation: duckdb.DuckDBPyRelation) -> None:
    print(f"-- {caption}")
    relation.show(max_width=200)


def read(warehouse: ledger.Warehouse) -> dict[str, Any]:
    """Query the warehouse through views.connect: every table by name, as of now."""
    with views.connect(warehouse) as con:
        show("customers (visible rows: the latest version of each)", con.sql(CUSTOMERS))
        show(
            "entries per customer in customers_ledger (the raw entries)",
            con.sql(ENTRIES_PER_CUSTOMER),
        )
        show("revenue per tier: orders JOIN customers", con.sql(REVENUE_PER_TIER))
        return {
            "customers": con.sql(CUSTOMERS).fetchall(),
            "entries": dict(con.sql(ENTRIES_PER_CUSTOMER).fetchall()),
            "revenue": con.sql(REVENUE_PER_TIER).fetchall(),
        }


def main(warehouse_path: str | None = None) -> dict[str, Any]:
    """Run the example on a new warehouse at ``warehouse_path`` (a temporary folder if None)
    and return the answers before and after the merge."""
    if warehouse_path is None:
        with tempfile.TemporaryDirectory(prefix="ledger-dimension-") as folder:
            return main(folder)
    warehouse = ledger.connect(warehouse_path)

    title("1. a customer dimension with the replacing policy, and an orders ledger")
    customers = warehouse.create_table(
        "customers",
        {
            "customer_id": "BIGINT",
            "name": "VARCHAR",
            "tier": "VARCHAR",
            "city": "VARCHAR",
            "updated_at": "TIMESTAMP",
        },
        primary_key="customer_id",
        policy={"name": "replacing", "version_column": "updated_at"},
    )
    for batch in CUSTOMER_BATCHES:
        # A new version is just an insert: no read of the old one, no delete mark.
        customers.insert([dict(zip(CUSTOMER_COLUMNS, row, strict=True)) for row in batch])
    orders = warehouse.create_table(
        "orders",
        {"order_id": "BIGINT", "customer_id": "BIGINT", "amount": "DECIMAL(12,2)"},
        primary_key="order_id",
    )
    orders.insert(
        [dict(zip(("order_id", "customer_id", "amount"), o, strict=True)) for o in ORDERS]
    )
    orders.delete([CANCELLED_ORDER])  # a cancelled order: a delete mark in the fact ledger
    print(customers, customers.config["policy"], f"{len(customers.files())} data files")
    print(orders, f"order {CANCELLED_ORDER} cancelled")

    title("2. before the merge: five versions of the feed in five files")
    before = read(warehouse)
    before["files"] = len(customers.files())

    title("3. merge: only the latest version of each customer remains in the files")
    print(customers.merge(min_files=1))
    after = read(warehouse)  # a new connection sees the merged version
    after["files"] = len(customers.files())
    print("revenue per tier unchanged by the merge:", before["revenue"] == after["revenue"])
    return {"before": before, "after": after}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
