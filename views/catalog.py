"""One DuckDB connection that knows every table of a warehouse by name, to just write SQL.

For each table ``t``: ``t`` is its visible rows and ``t_ledger`` its raw ledger (every entry,
system columns included), both at the version current when registered. The functions live in
:mod:`ledger.reads.catalog` (``ledger sql`` registers the tables with them); this is their
public name.

>>> con = views.connect(ledger.connect("./warehouse"))                    # doctest: +SKIP
>>> con.sql("SELECT region, sum(amount) FROM accounts GROUP BY region").fetchall()  # doctest: +SKIP
"""

from __future__ import annotations

from ledger.reads.catalog import INTERNAL_CATALOG, LEDGER_SUFFIX, connect, register

__all__ = ["INTERNAL_CATALOG", "LEDGER_SUFFIX", "connect", "register"]
