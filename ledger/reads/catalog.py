"""One DuckDB connection that knows every table of a warehouse by name, to just write SQL.

For each table ``t``: ``t`` is its visible rows and ``t_ledger`` its raw ledger (every entry,
system columns included), both at the version current when registered. DuckDB names are
case-insensitive: a table whose names clash with ones already registered (``Sales`` after
``sales``, or a table called ``x_ledger`` next to ``x``) is skipped with a warning.

>>> con = views.connect(ledger.connect("./warehouse"))                    # doctest: +SKIP
>>> con.sql("SELECT region, sum(amount) FROM accounts GROUP BY region").fetchall()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ledger.engines.duckdb.session import connect as connect_duckdb
from ledger.errors import TableNotFoundError
from ledger.reads.front import visible
from ledger.sql import ident
from ledger.warehouse import Warehouse
from ledger.warehouse import connect as connect_warehouse

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)

LEDGER_SUFFIX = "_ledger"
INTERNAL_CATALOG = "ledger_internal"


def register(con: duckdb.DuckDBPyConnection, warehouse: Warehouse) -> list[str]:
    """Create (or replace) a view of every table's visible rows and raw ledger on ``con``;
    returns the names of the views made."""
    made: list[str] = []
    taken: dict[str, str] = {}  # DuckDB names are case-insensitive
    for name in warehouse.tables():
        try:
            table = warehouse.table(name)
        except TableNotFoundError:  # dropped while listing
            continue
        wanted = [name, name + LEDGER_SUFFIX]
        clashes = [w for w in wanted if w.lower() in taken]
        if clashes:
            log.warning(
                "table %r is not registered: %s already name(s) %s",
                name,
                clashes,
                [taken[c.lower()] for c in clashes],
            )
            continue
        snap = table.snapshot()
        with _internal_catalog(con):
            snap.scan(con=con).create_view(name + LEDGER_SUFFIX, replace=True)
            visible(snap, con=con).create_view(name, replace=True)
        for view in wanted:
            con.execute(
                f"CREATE OR REPLACE VIEW {ident(view)} AS "
                f"SELECT * FROM {ident(INTERNAL_CATALOG)}.main.{ident(view)}"
            )
        taken.update({name.lower(): f"table {name!r}", wanted[1].lower(): f"{name!r}'s ledger"})
        made += wanted
    return made


@contextmanager
def _internal_catalog(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Make the views' building blocks (the relations each view query reads by name) in a
    catalog of their own, so that the user's catalog lists only tables and their ledgers.
    Views bind names in the catalog they were made in, so the blocks need no qualifying."""
    con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {ident(INTERNAL_CATALOG)}")
    row = con.execute("SELECT current_database(), current_schema()").fetchone()
    assert row is not None  # a connection always has a current database
    con.execute(f"USE {ident(INTERNAL_CATALOG)}")
    try:
        yield
    finally:
        con.execute(f"USE {ident(str(row[0]))}.{ident(str(row[1]))}")


def connect(warehouse: Warehouse | str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection with every table of ``warehouse`` registered (see
    :func:`register`); a warehouse may be given by its path or URI, as to ``ledger.connect``.

    >>> con = views.connect("warehouse/")  # doctest: +SKIP
    """
    if isinstance(warehouse, str | os.PathLike):
        warehouse = connect_warehouse(os.fspath(warehouse))
    con = connect_duckdb()
    register(con, warehouse)
    return con
