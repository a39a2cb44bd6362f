"""SQL that callers hand to an operation, checked before anything runs.

Merge queries, partition rewrites, ``where=`` predicates and rollup measures are written by
callers in DuckDB's SQL. DuckDB runs whatever statement it is given (``COPY ... TO`` writes a
file, ``ATTACH`` opens a database, ``read_csv('/etc/passwd')`` reads one), so every such text is
parsed first and accepted only in an allowed shape:

- a query is one SELECT (CTEs, subqueries and UNION/INTERSECT/EXCEPT of selects are fine) whose
  tables are only the relations the operation provides or its own CTEs;
- an expression (a predicate, a measure) names columns and scalar functions only;
- no function DuckDB resolves as a table function (every file reader among them) and no function
  that reveals the engine's settings or the environment is called anywhere.

What runs afterwards is the checked tree rendered again, never the caller's text, so a comment or
a construct the parser reads differently from DuckDB cannot smuggle a second statement through.

>>> checked_select("select * from ENTRIES where id <> 4", ("entries",), "rewrite query")
'SELECT * FROM ENTRIES WHERE id <> 4'
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Collection
from typing import Any

import sqlglot
from sqlglot import exp

from ledger.engines.duckdb.session import function_kinds, function_schemas
from ledger.errors import UnsafeSqlError

DIALECT = "duckdb"

# Statements sqlglot knows; anything else it cannot parse falls back to exp.Command.
_STATEMENTS: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Alter", "Analyze", "Attach", "Cache", "Command", "Commit", "Copy", "Create", "DDL",
        "DML", "Declare", "Delete", "Describe", "Detach", "Drop", "Export", "Grant", "Insert",
        "Install", "Into", "Kill", "LoadData", "Merge", "Pragma", "Refresh", "Revoke",
        "Rollback", "Set", "Show", "Summarize", "Transaction", "TruncateTable", "Uncache",
        "Update", "Use",
    )
    if hasattr(exp, name)
)  # fmt: skip

_QUERY_SHAPES = (exp.Select, exp.SetOperation, exp.Subquery)

# Readers and catalog functions, refused even when this DuckDB build lacks the extension that
# would define them (a later build, or one with the extension loaded, would run them).
_TABLE_FUNCTIONS = frozenset(
    {
        "read_parquet", "parquet_scan", "parquet_metadata", "parquet_schema",
        "parquet_file_metadata", "parquet_kv_metadata", "read_csv", "read_csv_auto", "sniff_csv",
        "read_json", "read_json_auto", "read_json_objects", "read_json_objects_auto",
        "read_ndjson", "read_ndjson_auto", "read_ndjson_objects", "read_text", "read_blob",
        "read_xlsx", "glob", "query", "query_table", "iceberg_scan", "iceberg_metadata",
        "delta_scan", "st_read", "sqlite_scan", "sqlite_attach", "postgres_scan",
        "postgres_query", "mysql_scan", "mysql_query", "duckdb_secrets", "duckdb_settings",
        "load_aws_credentials", "table",
    }
)  # fmt: skip

# Scalar functions that reveal settings or the environment, or (in Spark, where predicates are
# rendered too) call into the JVM, read file names or fail on purpose.
_LEAKING_FUNCTIONS = frozenset(
    {
        "current_setting", "getenv", "current_query", "reflect", "java_method", "try_reflect",
        "input_file_name", "input_file_block_start", "input_file_block_length", "raise_error",
        "assert_true", "current_user", "session_user", "user", "getvariable",
        "current_connection_id", "current_transaction_id", "current_query_id", "txid_current",
        "has_any_column_privilege", "has_column_privilege", "has_database_privilege",
        "has_foreign_data_wrapper_privilege", "has_function_privilege",
        "has_language_privilege", "has_schema_privilege", "has_sequence_privilege",
        "has_server_privilege", "has_table_privilege", "has_tablespace_privilege",
        # The connection's catalog and session: the database, schema and search path in use,
        # the role, the build, sequences, the log, the seed of random().
        "current_database", "current_catalog", "current_schema", "current_schemas",
        "current_role", "in_search_path", "version", "current_version", "get_block_size",
        "currval", "nextval", "setval", "setseed", "write_log", "parse_duckdb_log_message",
        "stats", "vector_type", "error",
    }
)  # fmt: skip


def checked_select(sql: Any, relations: Collection[str], what: str) -> str:
    """``sql`` rendered from its parse tree once it is known to be one SELECT reading only
    ``relations`` (matched as DuckDB matches names: ignoring ASCII case); else
    :class:`UnsafeSqlError` saying why.

    >>> checked_select("COPY (SELECT 1) TO '/tmp/x.csv'", ("entries",), "rewrite query")
    Traceback (most recent call last):
    ledger.errors.UnsafeSqlError: rewrite query must be one SELECT ...
    """
    if not isinstance(sql, str) or not sql.strip():
        raise UnsafeSqlError(f"{what} must be a SELECT over {_names(relations)}, got {sql!r}")
    return _checked_select(sql, tuple(relations), what)


# A custom policy's query is checked each time the policy is loaded (every read and commit of
# its table): parse it once per text.
@functools.lru_cache(maxsize=256)
def _checked_select(sql: str, relations: tuple[str, ...], what: str) -> str:
    rendered = _checked_render(sql, relations, what)
    # Check what will run: the rendered text, parsed again, must pass and render the same.
    if _checked_render(rendered, relations, what) != rendered:
        raise UnsafeSqlError(
            f"{what} {sql!r} cannot be verified (it does not survive a round trip through the "
            "SQL parser); write it as a plain SELECT"
        )
    return rendered


def check_expression(
    tree: exp.Expr, text: str, what: str, error: type[UnsafeSqlError] = UnsafeSqlError
) -> None:
    """Refuse an expression (a predicate, a measure) that holds a statement, a table, a table
    function or a function revealing settings; ``error`` is the type raised."""
    _check_nodes(tree, text, what, error, tables=False)


def _check_nodes(
    tree: exp.Expr, text: str, what: str, error: type[UnsafeSqlError], *, tables: bool
) -> None:
    for node in tree.walk():
        if isinstance(node, _STATEMENTS):
            raise error(
                f"{what} {text!r} holds a statement ({node.key.upper()}); write "
                + ("one SELECT" if tables else "an expression over the table's columns")
            )
        if not tables and _expands_columns(node):
            raise error(
                f"{what} {text!r} expands columns ({node.sql(dialect=DIALECT)}); name the "
                "table's columns one by one"
            )
        if isinstance(node, exp.Table) and not tables:
            raise error(
                f"{what} {text!r} reads a table ({node.sql(dialect=DIALECT)}); write an "
                "expression over the table's columns"
            )
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            # The statement's own parameters (file lists) are not the caller's to read, and a
            # caller's placeholder has no value to bind.
            raise error(
                f"{what} {text!r} holds a parameter placeholder ({node.sql(dialect=DIALECT)}); "
                "write the value itself"
            )
        if isinstance(node, exp.Func):
            _check_function(node, text, what, error)
        if tables and isinstance(node, exp.Column) and _reads_a_session_value(node):
            raise error(
                f"{what} {text!r} names {node.name!r} unqualified: where its relation has no "
                f"such column, DuckDB reads it as the session's {node.name}, which caller SQL "
                "may not read; if it is a column, qualify it with its relation's name "
                f'(rows."{node.name}")'
            )


# Names DuckDB reads, when no column of the relation has them, as the session's values (its
# "SQL value functions", written without parentheses, quoted or not).
_SESSION_VALUES = frozenset(
    {"current_catalog", "current_role", "current_schema", "current_user", "session_user", "user"}
)


def _reads_a_session_value(node: exp.Column) -> bool:
    """Whether column reference ``node`` may be read as a session value: unqualified, and
    named like one."""
    return not node.table and node.name.lower() in _SESSION_VALUES


def _in_recursive_arm(node: exp.Expr, cte: exp.CTE) -> bool:
    """Whether ``node`` is in the recursive arm of ``cte``: the right side of the UNION that is
    its body (only there does DuckDB read the CTE's own name as the CTE)."""
    body = cte.this
    if not isinstance(body, exp.Union):
        return False
    arm = body.expression
    return any(ancestor is arm for ancestor in _ancestors(node))


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    found: list[exp.Expr] = []
    parent = node.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found


def _expands_columns(node: exp.Expr) -> bool:
    """A star, COLUMNS(...) or a positional column: in an expression these expand over every
    column the engine has, the ledger's system columns included (count(*) counts rows)."""
    if isinstance(node, exp.Columns | exp.PositionalColumn):
        return True
    return isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count)


def _checked_render(sql: str, relations: Collection[str], what: str) -> str:
    tree = _one_statement(sql, relations, what)
    if not isinstance(tree, _QUERY_SHAPES):
        raise UnsafeSqlError(
            f"{what} must be one SELECT over {_names(relations)} (CTEs, subqueries, UNION, "
            f"INTERSECT and EXCEPT are fine), not {tree.key.upper()}: {sql!r}"
        )
    _check_tables(tree, relations, sql, what)
    _check_nodes(tree, sql, what, UnsafeSqlError, tables=True)
    return str(tree.sql(dialect=DIALECT, comments=False))


# Deeper trees are refused: rendering and checking them recurses once per level, and Python's
# stack ends near a thousand frames.
MAX_DEPTH = 200


def too_deep(tree: exp.Expr) -> bool:
    """Whether ``tree`` nests deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    return False


def _one_statement(sql: str, relations: Collection[str], what: str) -> exp.Expr:
    # sqlglot logs a warning for each statement it cannot parse; it is refused just below.
    parser_log = logging.getLogger("sqlglot")
    level = parser_log.level
    parser_log.setLevel(logging.ERROR)
    try:
        statements = sqlglot.parse(sql, dialect=DIALECT)
    except sqlglot.errors.SqlglotError as e:
        raise UnsafeSqlError(
            f"{what} must be one SELECT over {_names(relations)}; {sql!r} does not parse: "
            f"{without_terminal_codes(str(e))}"
        ) from e
    except RecursionError as e:
        raise UnsafeSqlError(f"{what} {sql[:80]!r}... nests too deeply") from e
    finally:
        parser_log.setLevel(level)
    present = [s for s in statements if s is not None]
    if any(too_deep(s) for s in present):
        raise UnsafeSqlError(f"{what} {sql[:80]!r}... nests too deeply")
    if len(present) != 1 or len(statements) != 1:
        raise UnsafeSqlError(
            f"{what} must be exactly one SELECT over {_names(relations)}; {sql!r} holds "
            f"{len(present)} statements"
        )
    return present[0]


def _check_tables(tree: exp.Expr, relations: Collection[str], sql: str, what: str) -> None:
    for table in tree.find_all(exp.Table):
        shown = table.sql(dialect=DIALECT)
        if not isinstance(table.this, exp.Identifier):
            raise UnsafeSqlError(
                f"{what} {sql!r} reads {shown}, a table function; read only {_names(relations)}"
            )
        if table.args.get("db") or table.args.get("catalog"):
            raise UnsafeSqlError(
                f"{what} {sql!r} reads {shown}; name {_names(relations)} without a schema or "
                "database"
            )
        visible = [*relations, *_ctes_around(table)]
        if not any(_same_name(table.name, name) for name in visible):
            raise UnsafeSqlError(
                f"{what} {sql!r} reads {shown}, which is not {_names(relations)} nor one of its "
                "CTEs (file paths, catalog tables and other tables are refused)"
            )


def _ctes_around(node: exp.Expr) -> list[str]:
    """The CTE names visible at ``node``, as DuckDB scopes them: a query sees every CTE of its
    WITH, but a CTE's own body sees only the CTEs defined before it (and itself when the WITH is
    RECURSIVE). A name DuckDB does not resolve to a CTE is read as a table or a file path, so a
    later or self-named CTE must not count."""
    names: list[str] = []
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.With):
            ctes = list(parent.expressions)
            index = next((i for i, cte in enumerate(ctes) if cte is child), None)
            if index is not None:
                recursive = parent.args.get("recursive") and _in_recursive_arm(node, ctes[index])
                ctes = ctes[: index + 1] if recursive else ctes[:index]
            names.extend(cte.alias for cte in ctes)
        else:
            with_clause = parent.args.get("with_")
            if isinstance(with_clause, exp.With) and with_clause is not child:
                names.extend(cte.alias for cte in with_clause.expressions)
        child, parent = parent, parent.parent
    return names


def _same_name(given: str, name: str) -> bool:
    # DuckDB folds ASCII case only; a non-ASCII name must match exactly.
    return given == name or (given.isascii() and name.isascii() and given.lower() == name.lower())


def _check_function(node: exp.Func, text: str, what: str, error: type[UnsafeSqlError]) -> None:
    names = _function_names(node)
    # A name that is both (unnest, range, generate_series) resolves to its scalar form outside
    # FROM; in FROM any function is refused by _check_tables.
    table_only = duckdb_table_functions() - duckdb_scalar_functions()
    refused = names & (_TABLE_FUNCTIONS | _LEAKING_FUNCTIONS | table_only | catalog_helpers())
    if refused:
        raise error(
            f"{what} {text!r} calls {sorted(refused)[0]}(), a table function or one that reads "
            "files or settings; use the provided relations, columns and scalar functions only"
        )
    if isinstance(node, exp.Anonymous) and not names & duckdb_scalar_functions():
        raise error(
            f"{what} {text!r} calls {node.name}(), which is not a scalar or aggregate function "
            "of DuckDB"
        )


@functools.cache
def catalog_helpers() -> frozenset[str]:
    """Functions DuckDB defines for Postgres clients (schema ``pg_catalog``: ``pg_get_viewdef``,
    ``format_type``, ``col_description``...): each reads the catalog or the session."""
    return frozenset(name for name, schema in function_schemas() if schema == "pg_catalog")


def _function_names(node: exp.Func) -> set[str]:
    if isinstance(node, exp.Anonymous):
        return {str(node.name).lower()}
    return {name.lower() for name in node.sql_names()}


@functools.cache
def duckdb_table_functions() -> frozenset[str]:
    """Names DuckDB resolves as table functions, table macros or pragmas."""
    return _catalog_functions(("table", "table_macro", "pragma"), keep=True)


@functools.cache
def duckdb_scalar_functions() -> frozenset[str]:
    """Names DuckDB resolves as scalar, aggregate or window functions, or scalar macros."""
    return _catalog_functions(("table", "table_macro", "pragma"), keep=False)


def _catalog_functions(kinds: tuple[str, ...], *, keep: bool) -> frozenset[str]:
    return frozenset(name for name, kind in function_kinds() if (kind in kinds) == keep)


def _names(relations: Collection[str]) -> str:
    return " or ".join(repr(r) for r in relations)


_TERMINAL_CODE = re.compile(r"\x1b\[[0-9;]*m")
# The parser names its own classes when an operator lacks an operand ("amount >").
_MISSING_PART = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")


def without_terminal_codes(message: str) -> str:
    """The parser's message without the escape codes it underlines the bad token with (error
    messages land in logs and files, where those codes are noise) and in the user's terms."""
    message = _MISSING_PART.sub("an operand or argument is missing", message)
    return _TERMINAL_CODE.sub("", message)
