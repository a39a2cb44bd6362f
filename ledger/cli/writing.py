"""Writing data from files: ``load``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex

import click

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.progress import activity
from ledger.cli.session import CommandError, Session, pass_session
from ledger.errors import (
    InvalidArgumentError,
    KeyNotFoundError,
    MalformedSourceError,
    SchemaError,
    UnknownColumnError,
)
from ledger.inputs import SourceFiles, local_source_files, read_rows
from ledger.schema import ROW_ID, separator_hint
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
    loaded into TABLE in this mode (same paths, sizes and modification times) are skipped: a
    folder or glob loads only its new or changed files, and a load with nothing new writes
    nothing and warns, unless --force."""
    target = session.table(table)
    refuse_special_file(source)
    tokens = {} if force else load_tokens(source, mode)
    while True:
        loaded = target.handle.latest_state().apps
        pending = {path: token for path, token in tokens.items() if token not in loaded}
        if tokens and not pending:
            _skipped(table, source, mode, output_format)
            return
        # Exactly the files named by the app ids committed: a file landing in the folder
        # meanwhile waits for the next load.
        data = SourceFiles(source, tuple(pending)) if pending else source
        info = _load_once(target, table, mode, source, data, evolve_schema, pending)
        if info.version is not None or not _any_loaded(target, pending):
            break
        # A load running beside this one committed some of these files first: nothing was
        # committed; load what is left.
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


def _any_loaded(target: Table, tokens: dict[str, str]) -> bool:
    loaded = target.handle.latest_state().apps
    return any(token in loaded for token in tokens.values())


def _load_once(
    target: Table,
    table: str,
    mode: str,
    source: str,
    data: str | SourceFiles,
    evolve_schema: bool,
    tokens: dict[str, str],
) -> CommitInfo:
    with activity(f"{mode} {source} into {table}"):
        try:
            return _write(target, mode, data, evolve_schema, tokens)
        except UnknownColumnError as e:
            # The library's advice names its own argument; here the flag is what adds them.
            found, evolve, advice = str(e).partition(" Pass evolve_schema=True to add ")
            found = command_line_advice(found, source).rstrip()
            tail = (
                f" Load again with --evolve-schema to add {advice}; nothing was written"
                if evolve
                else ("" if found.endswith(".") else ".") + " Nothing was written."
            )
            raise CommandError(f"UnknownColumnError: {found}{tail}") from e
        except MalformedSourceError as e:
            hint = _header_separator_hint(target, source)
            if not hint:
                raise
            raise CommandError(f"MalformedSourceError: {e}.{hint}") from e
        except SchemaError as e:
            advice = command_line_advice(str(e), source)
            if advice == str(e):
                raise
            raise CommandError(f"SchemaError: {advice}") from e
        except (KeyNotFoundError, InvalidArgumentError) as e:
            advice = _LOAD_MODE_ADVICE.sub(r"\1--mode \2", str(e))
            if advice == str(e):
                raise
            raise CommandError(f"{type(e).__name__}: {advice}") from e


def _header_separator_hint(target: Table, source: str) -> str:
    """Advice for a CSV file separated by another character than a comma whose fields hold
    commas (a decimal comma: ``id;price`` then ``1;2,50``), which fails to parse before its
    header is checked: the same advice as for a header read as one name. Empty when ``source``
    is not one local CSV file with such a header."""
    if not (source.endswith(".csv") and os.path.isfile(source)):
        return ""
    try:
        with open(source, encoding="utf-8", newline="") as file:
            header = file.readline(1 << 16).rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return ""
    if "," in header:
        return ""
    return command_line_advice(
        separator_hint([header], target.handle.latest_state().schema), source
    )


def refuse_special_file(source: str) -> None:
    """A local path that exists and is neither a file nor a folder (a device such as
    ``/dev/stdin``, a pipe, a socket) is said as such: a load reads files, which it lists and
    may read twice."""
    if "://" in source or not os.path.exists(source):
        return
    if not (os.path.isfile(source) or os.path.isdir(source)):
        raise CommandError(
            f"{source!r} is neither a file nor a folder of data files (it is a device, pipe or "
            "socket, such as /dev/stdin): `ledger load` reads a CSV, JSON-lines or Parquet "
            "file, a folder or a glob of them; write the data to a file first (e.g. "
            "`cat > rows.csv`) and load that file"
        )


# The library's advice for a CSV file separated by another character than a comma, and for
# nested JSON values, names Python calls; the command line's are a conversion it can run and
# the option of `ledger create` that gives a table an insert transform.
_SEPARATOR_ADVICE = re.compile(
    r"convert the file \(e\.g\. pandas\.read_csv\(path, sep=(?P<sep>'[^']*'|\"[^\"]*\")\), "
    r"then insert the frame\)"
)
_TRANSFORM_ADVICE = re.compile(
    r"with an insert transform reading (?P<column>\S+)\.<field> AS a column of the table\)"
)


def command_line_advice(message: str, source: str) -> str:
    """``message`` with the library's Python advice said as command lines."""

    def separator(match: re.Match[str]) -> str:
        single = source.endswith(".csv") and os.path.isfile(source)
        file = shlex.quote(source) if single else "FILE.csv"
        converted = (
            shlex.quote(f"{source[: -len('.csv')]}-commas.csv") if single else "FILE-commas.csv"
        )
        program = (
            "import csv, sys; csv.writer(sys.stdout).writerows(csv.reader(sys.stdin, "
            f"delimiter={match['sep']}))"
        )
        return (
            f'convert it to commas and load that file: `python -c "{program}" < {file} > '
            f"{converted}` (`ledger load` reads commas only)"
        )

    def transform(match: re.Match[str]) -> str:
        column = match["column"]
        return (
            f"in a table made with an insert transform reading {column}.<field>: `ledger "
            f"create NAME --schema '...' --insert-transform 'SELECT ..., {column}.<field> AS "
            "<column> FROM rows'`)"
        )

    return _TRANSFORM_ADVICE.sub(transform, _SEPARATOR_ADVICE.sub(separator, message))


# The library's advice names its operations ("use upsert to insert new keys"); the command
# line's are modes of ``load``.
_LOAD_MODE_ADVICE = re.compile(r"\b(use )(upsert|insert|update|delete)\b")


def load_tokens(source: str, mode: str) -> dict[str, str]:
    """The app id under which a load in ``mode`` commits each local data file of ``source``
    (its batch is 1), by path: the file's path, size and modification time and the mode. A
    table's log keeps every app id it committed, so a file already loaded is recognised
    whatever source named it, and two loads racing each other commit each file once. Empty for
    a source on object storage or one matching no file."""
    tokens = {}
    for path in local_source_files(source):
        status = os.stat(path)
        identity = [mode, f"{os.path.abspath(path)}\0{status.st_size}\0{status.st_mtime_ns}"]
        digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]
        tokens[path] = f"ledger-load-{digest}"
    return tokens


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
    target: Table,
    mode: str,
    data: str | SourceFiles,
    evolve_schema: bool,
    tokens: dict[str, str],
) -> CommitInfo:
    """One commit of ``data``, carrying the app id of each file it reads: it commits nothing if
    another load committed any of them first."""
    apps = dict.fromkeys(tokens.values(), 1)
    if mode == "insert":
        return target.retrying(lambda tx: tx.insert(data), evolve_schema=evolve_schema, apps=apps)
    if mode == "upsert":
        return target.retrying(lambda tx: tx.upsert(data), evolve_schema=evolve_schema, apps=apps)
    if mode == "update":
        return target.retrying(lambda tx: tx.update(data), evolve_schema=evolve_schema, apps=apps)
    if evolve_schema:
        raise click.UsageError("--evolve-schema does not apply to --mode delete")
    _refuse_columns_the_table_lacks(target, data)
    return target.retrying(lambda tx: tx.delete(data), apps=apps)


def _refuse_columns_the_table_lacks(target: Table, data: str | SourceFiles) -> None:
    """A delete file holds the keys and may hold the table's other columns: a column the table
    lacks is most likely a mistake (another table's file, a misspelt key), refused as every
    other mode refuses it, though the library's delete ignores such columns. Reads the file
    (its names and values checked as a delete reads them) before the delete reads it again."""
    schema = target.handle.latest_state().schema
    known = {*schema.names, ROW_ID}
    for rows in read_rows(data, schema, store=target.store, empty_sources=True):
        unknown = [name for name in rows.table.column_names if name not in known]
        if unknown:
            raise UnknownColumnError(
                f"unknown column(s) {unknown} in the delete file; the table has {schema.names}. "
                "A delete file holds the keys to delete and may hold other columns of the table"
            )


COMMANDS = [load]
