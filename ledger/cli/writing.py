"""Writing data from files: ``load``."""

from __future__ import annotations

import hashlib
import json
import os
import re

import click

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.progress import activity
from ledger.cli.session import CommandError, Session, pass_session
from ledger.errors import InvalidArgumentError, KeyNotFoundError, UnknownColumnError
from ledger.inputs import local_source_files
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
@click.option(
    "--force",
    is_flag=True,
    help="Load local files again although they were loaded (same mode, paths, sizes, times).",
)
@output_options
@pass_session
def load(
    session: Session,
    table: str,
    source: str,
    mode: str,
    evolve_schema: bool,
    force: bool,
    output_format: str | None,
) -> None:
    """Load SOURCE (CSV, JSON lines or Parquet; a file, folder or glob; local or s3://) into
    TABLE in one commit. The data is converted as the library converts it; a row that does not
    fit the table's schema fails the whole load before anything is written. Local files already
    loaded into TABLE in this mode (same paths, sizes and modification times) are skipped with
    a warning, unless --force."""
    target = session.table(table)
    token = None if force else load_token(source, mode)
    if token is not None and token in target.handle.latest_state().apps:
        _skipped(table, source, mode, output_format)
        return
    with activity(f"{mode} {source} into {table}"):
        try:
            info = _write(target, mode, source, evolve_schema, token)
        except UnknownColumnError as e:
            # The library's advice names its own argument; here the flag is what adds them.
            found, evolve, advice = str(e).partition(" Pass evolve_schema=True to add ")
            tail = (
                f" Load again with --evolve-schema to add {advice}; nothing was written"
                if evolve
                else " Nothing was written."
            )
            raise CommandError(f"UnknownColumnError: {found}{tail}") from e
        except (KeyNotFoundError, InvalidArgumentError) as e:
            advice = _LOAD_MODE_ADVICE.sub(r"\1--mode \2", str(e))
            if advice == str(e):
                raise
            raise CommandError(f"{type(e).__name__}: {advice}") from e
    if token is not None and info.version is None and token in target.handle.latest_state().apps:
        _skipped(table, source, mode, output_format)  # a load running beside this one won
        return
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


# The library's advice names its operations ("use upsert to insert new keys"); the command
# line's are modes of ``load``.
_LOAD_MODE_ADVICE = re.compile(r"\b(use )(upsert|insert|update|delete)\b")


def load_token(source: str, mode: str) -> str | None:
    """The app id a load of ``source`` in ``mode`` commits under (its batch is 1), naming the
    local files it reads by path, size and modification time: a table's log keeps every app id
    it committed, so a second load of the same files is recognised, and two loads racing each
    other commit once. None for a source on object storage or one matching no file."""
    files = local_source_files(source)
    if not files:
        return None
    identity = [mode]
    for path in files:
        status = os.stat(path)
        identity.append(f"{os.path.abspath(path)}\0{status.st_size}\0{status.st_mtime_ns}")
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]
    return f"ledger-load-{digest}"


def _skipped(table: str, source: str, mode: str, output_format: str | None) -> None:
    output.message(
        f"warning: {source} was already loaded into {table} with --mode {mode} (the same files, "
        "sizes and modification times); skipped, nothing written. Pass --force to load it again"
    )
    output.print_object(
        {
            "table": table,
            "version": None,
            "trx_id": None,
            "inserted": 0,
            "deleted": 0,
            "skipped": True,
        },
        output_format,
    )


def _write(
    target: Table, mode: str, source: str, evolve_schema: bool, token: str | None
) -> CommitInfo:
    batch = None if token is None else 1
    if mode == "insert":
        return target.insert(source, evolve_schema=evolve_schema, app_id=token, batch=batch)
    if mode == "upsert":
        return target.upsert(source, evolve_schema=evolve_schema, app_id=token, batch=batch)
    if mode == "update":
        return target.update(source, evolve_schema=evolve_schema, app_id=token, batch=batch)
    if evolve_schema:
        raise click.UsageError("--evolve-schema does not apply to --mode delete")
    return target.delete(source, app_id=token, batch=batch)


COMMANDS = [load]
