"""Writing data from files: ``load``."""

from __future__ import annotations

import click

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.progress import activity
from ledger.cli.session import Session, pass_session
from ledger.table import Table
from ledger.transaction import CommitInfo

MODES = ("insert", "upsert", "update", "delete")


@click.command(
    epilog="""\b
Examples:
  ledger load payments payments.csv
  ledger load payments 'exports/*.parquet' --mode upsert
  ledger load payments s3://bucket/corrections.jsonl --mode upsert
  ledger load payments cancelled.csv --mode delete        # the file holds the keys
"""
)
@click.argument("table")
@click.argument("source")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="insert",
    show_default=True,
    help="insert new rows; upsert (insert or replace by key); update existing keys; delete keys.",
)
@click.option("--evolve-schema", is_flag=True, help="Add columns the data has and the table lacks.")
@output_options
@pass_session
def load(
    session: Session,
    table: str,
    source: str,
    mode: str,
    evolve_schema: bool,
    output_format: str | None,
) -> None:
    """Load SOURCE (CSV, JSON lines or Parquet; a file, folder or glob; local or s3://) into
    TABLE in one commit. The data is converted as the library converts it; a row that does not
    fit the table's schema fails the whole load before anything is written."""
    target = session.table(table)
    with activity(f"{mode} {source} into {table}"):
        info = _write(target, mode, source, evolve_schema)
    output.print_object(
        {
            "table": table,
            "version": info.version,
            "trx_id": info.trx_id,
            "inserted": info.inserted,
            "deleted": info.deleted,
        },
        output_format,
    )


def _write(target: Table, mode: str, source: str, evolve_schema: bool) -> CommitInfo:
    if mode == "insert":
        return target.insert(source, evolve_schema=evolve_schema)
    if mode == "upsert":
        return target.upsert(source, evolve_schema=evolve_schema)
    if mode == "update":
        return target.update(source, evolve_schema=evolve_schema)
    if evolve_schema:
        raise click.UsageError("--evolve-schema does not apply to --mode delete")
    return target.delete(source)


COMMANDS = [load]
