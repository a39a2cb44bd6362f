"""Running queries on DuckDB: a sqlglot tree or SQL text over Arrow rows, and the checks that
bind a predicate before any file is read."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import closing

import duckdb
import pyarrow as pa
from sqlglot import exp

from ledger.engines.duckdb.errors import QUERY_ERRORS, engine_reason
from ledger.engines.duckdb.session import work_connection
from ledger.errors import InvalidPredicateError

DIALECT = "duckdb"  # the sqlglot dialect trees are rendered in

# The types of a condition: a boolean, or NULL (the unknown truth value, which matches no row;
# DuckDB types ``error('...')`` NULL, and it fails on the rows like any other failing predicate).
CONDITION_TYPES = frozenset({"BOOLEAN", '"NULL"'})


def run(con: duckdb.DuckDBPyConnection, query: exp.Expression) -> duckdb.DuckDBPyRelation:
    """``query`` rendered in DuckDB's dialect, as a relation on ``con`` (computed lazily).

    >>> from contextlib import closing
    >>> from sqlglot import select
    >>> from ledger.engines.duckdb.session import connect
    >>> with closing(connect()) as con:
    ...     run(con, select("1 AS one")).fetchall()
    [(1,)]
    """
    return con.sql(query.sql(dialect=DIALECT))


def query_over(sql: str, name: str, rows: pa.Table, failed: Callable[[str], Exception]) -> pa.Table:
    """``sql`` run over ``rows`` registered as ``name``; ``failed(reason)`` is raised when the
    engine refuses it or it fails on the rows."""
    with closing(work_connection()) as con:
        con.register(name, rows)
        try:
            result: pa.Table = con.sql(sql).to_arrow_table()
        except duckdb.Error as e:
            raise failed(str(e)) from e
    return result


def partition_values_matching(values: pa.Table, predicate: str) -> pa.Table:
    """The rows of ``values`` (one column per partition field) matching a SQL predicate.

    Raises :class:`InvalidPredicateError` when the predicate is not a boolean expression (DuckDB
    would accept ``WHERE 1``), and the engine's QUERY_ERRORS when it does not bind."""
    with closing(work_connection()) as con:
        con.register("partition_values", values)
        kind = con.sql(f"SELECT ({predicate}) FROM partition_values").types[0]
        if str(kind) not in CONDITION_TYPES:
            raise InvalidPredicateError(
                f"predicate {predicate!r} is {kind}, not a condition (true or false)"
            )
        return con.sql(f"SELECT * FROM partition_values WHERE ({predicate})").to_arrow_table()


def check_condition(schema: pa.Schema, predicate: str, *, shown: str | None = None) -> None:
    """Raise :class:`InvalidPredicateError` unless ``predicate`` binds over rows of ``schema``
    as a condition (unknown functions, type errors and non-boolean expressions fail here,
    before any file is read). Messages quote ``shown`` (the predicate as the user wrote it,
    when ``predicate`` is a rendering of it), never the query built around it."""
    quoted = predicate if shown is None else shown
    try:
        kind = _condition_type(schema, predicate)
    except QUERY_ERRORS as e:
        raise InvalidPredicateError(
            f"predicate {quoted!r} does not fit the table: {engine_reason(e)}"
        ) from e
    if kind not in CONDITION_TYPES:
        raise InvalidPredicateError(
            f"predicate {quoted!r} is {kind}, not a condition (true or false)"
        )


@functools.lru_cache(maxsize=256)
def _condition_type(schema: pa.Schema, predicate: str) -> str:
    """The type ``predicate`` binds to over rows of ``schema``: kept, since binding needs a
    connection and the same filter comes back with every call of a dashboard."""
    with closing(work_connection()) as con:
        con.register("checked_rows", schema.empty_table())
        return str(con.sql(f"SELECT ({predicate}) FROM checked_rows").types[0])
