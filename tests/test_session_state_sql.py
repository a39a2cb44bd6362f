"""Caller SQL cannot read the engine's session or catalog state: every DuckDB function that
answers from the connection rather than from its arguments (the database or schema in use, the
user, the version, settings, variables, sequences, the log, the catalog's Postgres-compatible
helpers) is refused wherever SQL is accepted: insert transforms, custom merge queries, partition
rewrites, ``where=`` predicates and rollup measures. The family is read from DuckDB's own
catalog, so a function this build adds under one of these names is covered too."""

from __future__ import annotations

import re

import duckdb
import pytest
import sqlglot

import ledger
import views
from ledger.insert_transform import check_shape
from ledger.sql_guard import check_expression, checked_select

# What marks a function as reading the session: its name, or the pg_catalog schema DuckDB
# keeps its Postgres-compatible catalog helpers in.
_FAMILY = re.compile(
    r"^(current_(?!date$|localtime|localtimestamp)\w+|session_user|user|version|"
    r"getvariable|getenv|in_search_path|currval|nextval|setval|setseed|write_log|"
    r"txid_current|get_block_size|pg_\w+|has_\w+_privilege|\w+_description|format_type|"
    r"inet_\w+)$"
)


def _session_functions() -> list[tuple[str, int]]:
    """(name, number of arguments) of every scalar function or macro of this DuckDB in the
    family above."""
    rows = (
        duckdb.connect()
        .sql(
            "SELECT DISTINCT lower(function_name), schema_name, len(parameters) "
            "FROM duckdb_functions() WHERE function_type IN ('scalar', 'macro')"
        )
        .fetchall()
    )
    found: dict[str, int] = {}
    for name, schema, arity in rows:
        if _FAMILY.match(name) or schema == "pg_catalog":
            found[name] = min(arity, found.get(name, arity))
    return sorted(found.items())


SESSION_FUNCTIONS = _session_functions()


def _call(name: str, arity: int) -> str:
    return f"{name}({', '.join(['1'] * arity)})"


def test_the_family_is_found_in_duckdbs_catalog():
    names = {name for name, _ in SESSION_FUNCTIONS}
    assert {"current_database", "current_schema", "current_catalog", "version"} <= names
    assert "current_date" not in names


@pytest.mark.parametrize(("name", "arity"), SESSION_FUNCTIONS)
def test_every_session_function_is_refused_in_queries_and_expressions(name, arity):
    call = _call(name, arity)
    with pytest.raises(ledger.UnsafeSqlError, match=re.escape(name)):
        checked_select(f"SELECT id, {call} AS x FROM entries", ("entries",), "rewrite query")
    with pytest.raises(ledger.UnsafeSqlError, match=re.escape(name)):
        check_expression(
            sqlglot.parse_one(f"{call} IS NULL", dialect="duckdb"),
            f"{call} IS NULL",
            "predicate",
        )
    with pytest.raises(ledger.UnsafeSqlError):
        check_shape(f"select id, {call}::VARCHAR as name from rows")


@pytest.mark.parametrize("call", ["current_database()", "version()", "current_schema()"])
def test_an_insert_transform_reading_the_session_writes_nothing(tmp_path, call):
    warehouse = ledger.connect(str(tmp_path / "wh"))
    with pytest.raises(ledger.UnsafeSqlError, match=call.split("(")[0]):
        warehouse.create_table(
            "t",
            {"id": "INTEGER", "name": "VARCHAR"},
            primary_key="id",
            insert_transform=f"select id, {call} as name from rows",
        )
    assert warehouse.tables() == []


def test_functions_of_the_row_still_run(tmp_path):
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table(
        "t",
        {"id": "INTEGER", "name": "VARCHAR"},
        primary_key="id",
        insert_transform="select id, upper(name) || left(today()::VARCHAR, 0) as name from rows",
    )
    table.insert([{"id": 1, "name": "ann"}])
    assert table.to_arrow().column("name").to_pylist() == ["ANN"]


# DuckDB's SQL value functions: written without parentheses (quoted or not), a name no column
# of the relation holds is read as the session's value.
_SESSION_VALUES = ["current_catalog", "current_role", "current_schema", "current_user", "user"]


@pytest.mark.parametrize("name", _SESSION_VALUES)
@pytest.mark.parametrize("spelling", ["{}", '"{}"', "{upper}"])
def test_a_session_value_named_as_a_bare_column_is_refused(tmp_path, name, spelling):
    written = spelling.format(name, upper=name.upper())
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id"
    )
    # Unquoted, some of them parse as the function itself: refused as its call.
    refused = "unqualified|calls"
    with pytest.raises(ledger.UnsafeSqlError, match=refused):
        table.set_insert_transform(f"SELECT id, {written} AS s FROM rows")
    for relation in ("entries", "rows"):
        with pytest.raises(ledger.UnsafeSqlError, match=refused):
            checked_select(f"SELECT *, {written} AS s FROM {relation}", (relation,), "query")
    assert table.refresh().version == 0


def test_a_column_named_like_a_session_value_is_read_qualified(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "user": "VARCHAR"}, primary_key="id"
    )
    table.set_insert_transform('SELECT id, upper(rows."user") AS "user" FROM rows')
    table.insert([{"id": 1}, {"id": 2, "user": "bob"}])
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "user": None},
        {"id": 2, "user": "BOB"},
    ]
    # A where= knows the table's columns: an unknown name is refused there before it runs.
    assert views.rows(table, where="\"user\" = 'BOB'").num_rows == 1
