"""DuckDB connections: in memory, never downloading extensions, computing in UTC."""

from __future__ import annotations

import uuid

import duckdb

DuckDBConnection = duckdb.DuckDBPyConnection
Relation = duckdb.DuckDBPyRelation

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def connect() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection that never downloads extensions.

    >>> from contextlib import closing
    >>> with closing(connect()) as con:
    ...     con.sql("SELECT 1 AS one").fetchall()
    [(1,)]
    """
    con = duckdb.connect(config=dict(_CONFIG))
    # Compute in UTC whatever the machine's zone: TIMESTAMPTZ values then come back as stored.
    con.execute("SET TimeZone = 'UTC'")
    return con


def bind_relations(
    con: duckdb.DuckDBPyConnection, relations: dict[str, duckdb.DuckDBPyRelation]
) -> dict[str, str]:
    """Make each relation readable by name in SQL on ``con`` (a temporary view under a fresh
    name, so several views on one connection never collide); returns the names."""
    names = {}
    for role, relation in relations.items():
        name = f"__ledger_{role}_{uuid.uuid4().hex[:12]}"
        relation.create_view(name, replace=True)
        names[role] = name
    return names


def function_kinds() -> list[tuple[str, str]]:
    """Every function name DuckDB knows (lower case) with its kind: scalar, aggregate, table,
    table_macro, pragma, ..."""
    with connect() as con:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name), function_type FROM duckdb_functions()"
        ).fetchall()
    return [(str(name), str(kind)) for name, kind in rows]
