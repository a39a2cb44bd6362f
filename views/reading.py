"""Views run on the embedded DuckDB engine: lazy relations over a snapshot's files.

The functions live in :mod:`ledger.reads.front` (the command line calls them too); this is
their public name.

>>> import views
>>> views.visible(table).df()                                             # doctest: +SKIP
>>> views.totals(table, by=["day"], sum=["amount"], avg=["amount"]).fetchall()  # doctest: +SKIP
"""

from __future__ import annotations

from ledger.reads.front import changes, history, rows, sql, totals, visible

__all__ = ["changes", "history", "rows", "sql", "totals", "visible"]
