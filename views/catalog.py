"""One DuckDB connection that knows every table of a warehouse by name, to just write SQL.

For each table ``t``: ``t`` is its visible rows and ``t_ledger`` its raw ledger (every entry,
system columns included), both at the version current when registered.

>>> con = views.connect(ledger.connect("./warehouse"))                    # doctest: +SKIP
>>> con.sql("SELECT region, sum(amount) FROM accounts GROUP BY region").fetchall()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.engines import duckdb as engine
from ledger.errors import TableNotFoundError
from ledger.warehouse import Warehouse
from views.reading import visible

if TYPE_CHECKING:
    import duckdb

LEDGER_SUFFIX = "_ledger"


def register(con: duckdb.DuckDBPyConnection, warehouse: Warehouse) -> list[str]:
    """Create (or replace) a view of every table's visible rows and raw ledger on ``con``;
    returns the names of the views made."""
    made = []
    for name in warehouse.tables():
        try:
            table = warehouse.table(name)
        except TableNotFoundError:  # dropped while listing
            continue
        snap = table.snapshot()
        raw = snap.scan(con=con)
        rows = visible(snap, con=con)
        raw.create_view(name + LEDGER_SUFFIX, replace=True)
        rows.create_view(name, replace=True)
        made += [name, name + LEDGER_SUFFIX]
    return made


def connect(warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection with every table of ``warehouse`` registered (see
    :func:`register`)."""
    con = engine.connect()
    register(con, warehouse)
    return con
