"""SQL over every table of a warehouse: ``sql``.

Each table ``t`` is registered as ``t`` (its visible rows) and ``t_ledger`` (its raw ledger).
Queries are read-only: each must be one SELECT over those names (checked as the library checks
caller SQL), and the DuckDB connection has file access turned off, so no query can write or
read a file of its own.
"""

from __future__ import annotations

import contextlib
import difflib
import sys
from typing import Any

import click
import duckdb
import sqlglot
from sqlglot import exp

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.session import CommandError, Session, is_s3, local_path, pass_session
from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.session import connect
from ledger.errors import LedgerError, TableNotFoundError, UnsafeSqlError
from ledger.reads.catalog import register as register_tables
from ledger.sql_guard import checked_select
from ledger.warehouse import Warehouse

PROMPT, CONTINUATION = "ledger> ", "   ...> "
HELP = "End a query with ';'. .tables lists the tables, .help shows this, .quit (or Ctrl-D) leaves."


@click.command(
    epilog="""\b
Examples:
  ledger sql "SELECT account, sum(amount) FROM payments GROUP BY account"
  ledger sql "SELECT count(*) FROM payments_ledger WHERE dml_type = -1" --json
  echo "SELECT * FROM payments" | ledger sql
  ledger sql                      # an interactive prompt on a terminal
"""
)
@click.argument("query", required=False)
@output_options
@pass_session
def sql(session: Session, query: str | None, output_format: str | None) -> None:
    """Run QUERY (or the queries on stdin, or an interactive prompt) on DuckDB, where each
    table is its visible rows by name and its raw ledger as NAME_ledger."""
    warehouse = session.warehouse()
    con, names = read_only_connection(warehouse)
    if query is None and sys.stdin.isatty():
        _prompt(con, names, output_format)
        return
    text = query if query is not None else sys.stdin.read()
    statements = _statements(con, text)
    if not statements:
        raise CommandError("no query given: pass one as an argument or on stdin")
    # Every statement is checked before any runs: a refused one later in the text must not
    # leave the earlier ones' output behind as if the text had been taken.
    checked = [_checked(statement, names) for statement in statements]
    for statement in checked:
        output.print_rows(run_checked(con, statement), output_format)


def read_only_connection(warehouse: Warehouse) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """A connection with every table registered, then closed to the file system: only the
    warehouse's own folder stays readable (the views read their files from it)."""
    con = connect()
    names = register_tables(con, warehouse)
    if not is_s3(warehouse.store.uri):
        root = local_path(warehouse.store.uri).rstrip("/") + "/"
        con.execute("SET allowed_directories = $dirs", {"dirs": [root]})
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con, names


def run(con: duckdb.DuckDBPyConnection, names: list[str], query: str) -> Any:
    """One checked SELECT, run; its rows as Arrow."""
    return run_checked(con, _checked(query, names))


def run_checked(con: duckdb.DuckDBPyConnection, statement: str) -> Any:
    """A statement already checked, run; a data file that cannot be read is a StorageError."""
    with storage_errors("running the query"):
        return con.sql(statement).to_arrow_table()


def _checked(query: str, names: list[str]) -> str:
    """``query`` checked as caller SQL; a refused table name close to a table's is reported as
    the table not found (a typo), not as an unsafe read."""
    try:
        return checked_select(query, names, "query")
    except UnsafeSqlError as e:
        typo = _misspelt_table(query, names)
        if typo is None:
            raise
        name, close = typo
        raise TableNotFoundError(
            f"table {name!r} does not exist; did you mean {' or '.join(map(repr, close))}?"
        ) from e


def _misspelt_table(query: str, names: list[str]) -> tuple[str, list[str]] | None:
    """The first table the query reads that is no table nor CTE, with the names close to it."""
    try:
        tree = sqlglot.parse_one(query, dialect="duckdb")
    except sqlglot.errors.ParseError:
        return None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    known = {name.lower() for name in names} | ctes
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.name.lower() in known:
            continue
        close = difflib.get_close_matches(table.name, names, n=3)
        return (table.name, close) if close else None
    return None


def _statements(con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
    try:
        return [s.query for s in con.extract_statements(text) if s.query.strip()]
    except duckdb.Error as e:
        raise CommandError(f"cannot parse the SQL: {' '.join(str(e).split())}") from e


def _prompt(con: duckdb.DuckDBPyConnection, names: list[str], output_format: str | None) -> None:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    output.message(HELP)
    pending: list[str] = []
    while True:
        try:
            line = input(CONTINUATION if pending else PROMPT)
        except EOFError:
            click.echo()
            return
        if not pending and line.strip().startswith("."):
            if not _meta_command(line.strip(), names, output_format):
                return
            continue
        pending.append(line)
        if not line.rstrip().endswith(";"):
            continue
        text, pending = "\n".join(pending), []
        try:
            for statement in _statements(con, text):
                output.print_rows(run(con, names, statement), output_format)
        except (LedgerError, duckdb.Error, CommandError) as e:
            output.message(f"Error: {' '.join(str(e).split())}")


def _meta_command(command: str, names: list[str], output_format: str | None) -> bool:
    """Run a dot command; False means leave the prompt."""
    if command in (".quit", ".exit", ".q"):
        return False
    if command == ".tables":
        output.print_rows([{"name": n} for n in names], output_format, columns=["name"])
    else:
        output.message(HELP)
    return True


COMMANDS = [sql]
