"""Reading tables: ``show``, ``totals``, ``log``, ``changes``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
import pyarrow as pa

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.parsing import point_in_time
from ledger.cli.session import Session, pass_session
from ledger.engines.duckdb.errors import predicate_failures, storage_errors
from ledger.engines.duckdb.query import check_condition
from ledger.errors import UnsafePredicateError
from ledger.reads import front
from ledger.sql import ident
from ledger.sql.predicates import parse_predicate
from ledger.sql.spec import TableSpec
from ledger.sql_guard import check_expression
from ledger.table import Table

F = TypeVar("F", bound=Callable[..., Any])


def snapshot_options(function: F) -> F:
    """``--version`` and ``--at``: which snapshot to read (default: the latest)."""
    function = click.option(
        "--at", "at", metavar="TIME", help="Read the table as of an ISO 8601 time (UTC if naive)."
    )(function)
    function = click.option(
        "--version", "version", type=click.IntRange(min=0), help="Read this table version."
    )(function)
    return function


def _limit_option(function: F) -> F:
    return click.option(
        "--limit", type=click.IntRange(min=0), help="Print at most this many rows."
    )(function)


@click.command(
    epilog="""\b
Examples:
  ledger show payments
  ledger show payments --where "account = 'alice'" --limit 10 --json
  ledger show payments --version 3
  ledger show payments --at 2026-01-31T12:00:00Z
"""
)
@click.argument("table")
@snapshot_options
@click.option("--where", help="A SQL predicate over the table's columns.")
@_limit_option
@click.option("--system-columns", is_flag=True, help="Add trx_id and trx_seq of each row.")
@output_options
@pass_session
def show(
    session: Session,
    table: str,
    version: int | None,
    at: str | None,
    where: str | None,
    limit: int | None,
    system_columns: bool,
    output_format: str | None,
) -> None:
    """Print the visible rows of TABLE, ordered by its key."""
    source = session.table(table)
    snapshot = source.snapshot(version, point_in_time(at))
    relation = front.visible(snapshot, system_columns=system_columns)
    if where is not None:
        relation = relation.filter(_checked_predicate(snapshot.state, where))
    key = TableSpec.of(snapshot.state).key_columns
    order = ", ".join(ident(c) for c in key if c in relation.columns)
    if order:
        relation = relation.order(order)
    if limit is not None:
        relation = relation.limit(limit)
    with predicate_failures(where, table), storage_errors(f"reading {table!r}"):
        rows = relation.to_arrow_table()
    output.print_rows(rows, output_format)


def _checked_predicate(state: Any, where: str) -> str:
    """The predicate rendered from its checked tree (never the caller's text)."""
    tree = parse_predicate(TableSpec.of(state), where)
    assert tree is not None
    check_expression(tree, where, "where", UnsafePredicateError)
    predicate = str(tree.sql(dialect="duckdb"))
    check_condition(state.schema.arrow(), predicate, shown=where)
    return predicate


@click.command(
    epilog="""\b
Examples:
  ledger totals payments --by account --sum amount
  ledger totals payments --sum amount --avg amount --where "amount > 0" --json
"""
)
@click.argument("table")
@click.option("--by", multiple=True, help="Group by this column (repeat).")
@click.option("--sum", "sums", multiple=True, help="Sum this column (repeat).")
@click.option("--avg", "averages", multiple=True, help="Average this column (repeat).")
@click.option("--no-count", is_flag=True, help="Leave out the row count.")
@click.option("--where", help="A SQL predicate over the table's columns.")
@snapshot_options
@output_options
@pass_session
def totals(
    session: Session,
    table: str,
    by: Sequence[str],
    sums: Sequence[str],
    averages: Sequence[str],
    no_count: bool,
    where: str | None,
    version: int | None,
    at: str | None,
    output_format: str | None,
) -> None:
    """Print exact sign-weighted totals of TABLE: sum(dml_type * x) over its ledger."""
    source = session.table(table)
    relation = front.totals(
        source,
        by=list(by) or None,
        sum=list(sums) or None,
        count=not no_count,
        avg=list(averages) or None,
        where=where,
        version=version,
        timestamp=point_in_time(at),
    )
    if by:
        relation = relation.order(", ".join(ident(c) for c in by))
    with storage_errors(f"reading {table!r}"):
        rows = relation.to_arrow_table()
    output.print_rows(rows, output_format)


@click.command(
    name="log",
    epilog="""\b
Examples:
  ledger log payments --limit 5
  ledger log payments --wide""",
)
@click.argument("table")
@_limit_option
@click.option(
    "--wide",
    is_flag=True,
    help="On a terminal, print every column even when they do not fit its width (CSV and "
    "JSON always have every column).",
)
@output_options
@pass_session
def commit_log(
    session: Session, table: str, limit: int | None, wide: bool, output_format: str | None
) -> None:
    """Print the commit history of TABLE, newest first.

    On a terminal too narrow for every column, each commit is one line of its version, time,
    operation and the files and rows it added and removed; --wide, --csv and --json print
    every column."""
    records = session.table(table).history()[::-1]
    # apps: every app batch of the commit ({app_id: batch}), null for a commit carrying none.
    rows = [{**vars(record), "apps": dict(record.apps) or None} for record in records[:limit]]
    terminal = output.chosen_format(output_format) == output.TABLE
    if terminal and not wide and not output.fits_terminal(rows, _LOG_COLUMNS):
        short = [_short_log_row(row) for row in rows]
        caption = "--wide shows every column"
        output.print_rows(short, output.TABLE, columns=_SHORT_LOG_COLUMNS, caption=caption)
        return
    output.print_rows(rows, output_format, columns=_LOG_COLUMNS)


_LOG_COLUMNS = [
    "version",
    "timestamp",
    "operation",
    "trx_id",
    "files_added",
    "files_removed",
    "inserted",
    "deleted",
    "app_id",
    "batch",
    "entries_removed",
    "apps",
]
# What a reader of the log scans for, in a table that fits 80 columns: which version, when,
# what it did, and how much it added and removed.
_SHORT_LOG_COLUMNS = ["version", "time (UTC)", "operation", "files", "rows"]


def _short_log_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": row["version"],
        "time (UTC)": row["timestamp"].astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "operation": row["operation"],
        "files": _added_removed(row["files_added"], row["files_removed"]),
        "rows": _rows_added_removed(row),
    }


def _rows_added_removed(row: dict[str, Any]) -> str:
    """``+3 -1``; a partition drop that could not count its rows shows the entries it removed
    instead, named as such."""
    if row["deleted"] is None:
        inserted = _added_removed(row["inserted"], 0)
        return " ".join(filter(None, (inserted, f"-{row['entries_removed']} entries")))
    return _added_removed(row["inserted"], row["deleted"])


def _added_removed(added: int, removed: int) -> str:
    """``+3 -1``; a side that is zero is left out, both zero is empty."""
    return " ".join(
        text for text, count in ((f"+{added}", added), (f"-{removed}", removed)) if count
    )


@click.command(
    epilog="""\b
Examples:
  ledger changes payments --since 2
  ledger changes payments --since 2 --until 5 --json
"""
)
@click.argument("table")
@click.option(
    "--since", type=click.IntRange(min=0), required=True, help="Changes after this version."
)
@click.option("--until", type=click.IntRange(min=0), help="Up to this version (default latest).")
@_limit_option
@output_options
@pass_session
def changes(
    session: Session,
    table: str,
    since: int,
    until: int | None,
    limit: int | None,
    output_format: str | None,
) -> None:
    """Print the change feed of TABLE: every entry committed after --since."""
    source: Table = session.table(table)
    relation = front.changes(source, since, until)
    relation = relation.order("_commit_version, trx_seq")
    if limit is not None:
        relation = relation.limit(limit)
    with storage_errors(f"reading {table!r}"):
        result: pa.Table = relation.to_arrow_table()
    output.print_rows(result, output_format)


COMMANDS = [show, totals, commit_log, changes]
