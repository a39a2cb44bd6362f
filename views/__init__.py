"""Generated views over ledger tables: visible rows, sign-weighted totals, history, changes.

Each view is SQL generated from the table's key, schema and merge policy as a sqlglot tree,
rendered for DuckDB (run here on a snapshot's files) or Spark SQL (:func:`sql`).

>>> import ledger, views
>>> table = ledger.connect("./warehouse").table("metrics")                # doctest: +SKIP
>>> views.visible(table).fetchall()                                       # doctest: +SKIP
>>> views.totals(table, by=["device_id"], avg=["temperature"]).fetchall()  # doctest: +SKIP
>>> views.publish_delta(table, "/lake/metrics")                            # doctest: +SKIP
"""

from __future__ import annotations

from views.catalog import connect, register
from views.publish import PublishResult, publish_delta
from views.reading import changes, history, rows, sql, totals, visible

__all__ = [
    "PublishResult",
    "changes",
    "connect",
    "history",
    "publish_delta",
    "register",
    "rows",
    "sql",
    "totals",
    "visible",
]
