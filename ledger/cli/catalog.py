"""Warehouse and table definitions: ``init``, ``tables``, ``create``, ``describe``."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.parsing import key_values, schema_text
from ledger.cli.parsing import schema_file as read_schema_file
from ledger.cli.session import Session, pass_session
from ledger.errors import TableExistsError
from ledger.log.entries import FileMarker
from ledger.reads.partition_counts import rows_of
from ledger.snapshot import Snapshot
from ledger.table import Table


@click.command(
    epilog="""\b
Examples:
  ledger init ./warehouse
  ledger init s3://bucket/prefix --endpoint-url http://127.0.0.1:9000
"""
)
@click.argument("uri", required=False)
@output_options
@pass_session
def init(session: Session, uri: str | None, output_format: str | None) -> None:
    """Make a warehouse at URI (default: --warehouse). Safe to run on an existing one."""
    warehouse = session.create_warehouse(uri)
    output.print_object(
        {"warehouse": warehouse.store.uri, "tables": len(warehouse.tables())}, output_format
    )


@click.command(epilog="\b\nExample:\n  ledger -w ./warehouse tables --json")
@output_options
@pass_session
def tables(session: Session, output_format: str | None) -> None:
    """List the tables with their version and live entries (`count()`: the visible rows,
    unless blind inserts gave a key several live entries)."""
    warehouse = session.warehouse()
    rows = []
    for name in sorted(warehouse.tables()):
        table = warehouse.table(name)
        rows.append(
            {
                "table": name,
                "version": table.version,
                # Not "rows": a key inserted blindly twice into a collapsing or dedup table has
                # two live entries and one visible row.
                "live_entries": table.count(),
                "key": ",".join(table.primary_key),
                "policy": table.config["policy"]["name"],
            }
        )
    output.print_rows(rows, output_format, columns=list(_TABLE_COLUMNS))


_TABLE_COLUMNS = ("table", "version", "live_entries", "key", "policy")


@click.command(
    epilog="""\b
Examples:
  ledger create payments --schema 'id VARCHAR, account VARCHAR, amount DECIMAL(18,2)' --key id
  ledger create events --schema-file schema.json --partition-by 'day(ts)'
  ledger create customers --schema 'id BIGINT, name VARCHAR, updated BIGINT' --key id \\
      --policy replacing --policy-option version_column=updated
"""
)
@click.argument("name")
@click.option("--schema", "schema", help="Columns: 'name TYPE, ...' or a JSON object.")
@click.option(
    "--schema-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON file of column names to types, or a Parquet file whose schema to take.",
)
@click.option("--key", "key", multiple=True, help="Primary-key column (repeat for several).")
@click.option(
    "--partition-by", multiple=True, help="Partition field: a column or e.g. 'day(ts)' (repeat)."
)
@click.option("--sort-by", multiple=True, help="Sort column inside files (repeat).")
@click.option(
    "--policy",
    help="Merge policy: collapsing (default), replacing, aggregating, dedup, custom, or JSON.",
)
@click.option(
    "--policy-option", multiple=True, metavar="NAME=VALUE", help="A policy option (JSON values)."
)
@click.option(
    "--insert-transform",
    metavar="SQL",
    help="A SELECT over `rows` (the columns of each load) shaping them into the table's, "
    "e.g. 'SELECT id, meta.a AS a FROM rows'.",
)
@output_options
@pass_session
def create(
    session: Session,
    name: str,
    schema: str | None,
    schema_file: Path | None,
    key: Sequence[str],
    partition_by: Sequence[str],
    sort_by: Sequence[str],
    policy: str | None,
    policy_option: Sequence[str],
    insert_transform: str | None,
    output_format: str | None,
) -> None:
    """Create table NAME."""
    if schema is not None and schema_file is None:
        columns: Any = schema_text(schema)
    elif schema_file is not None and schema is None:
        columns = read_schema_file(schema_file)
    else:
        raise click.UsageError("give the columns with exactly one of --schema or --schema-file")
    warehouse = session.warehouse()
    try:
        table = warehouse.create_table(
            name,
            columns,
            primary_key=list(key) or None,
            partition_by=list(partition_by) or None,
            sort_by=list(sort_by) or None,
            policy=_policy(policy, policy_option),
            insert_transform=insert_transform,
        )
    except TableExistsError as e:  # the library's message speaks of its Python API
        raise TableExistsError(
            f"table {name!r} already exists in {warehouse.store.uri}; load into it with "
            f"`ledger load {shlex.quote(name)} FILE`, see it with `ledger describe "
            f"{shlex.quote(name)}`, or choose "
            "another name"
        ) from e
    output.print_object(
        {"table": table.name, "version": table.version, "columns": len(table.schema)},
        output_format,
    )


def _policy(policy: str | None, options: Sequence[str]) -> Any:
    chosen: dict[str, Any] = {}
    if policy is not None and policy.strip().startswith("{"):
        try:
            chosen = json.loads(policy)
        except json.JSONDecodeError as e:
            raise click.BadParameter(f"not valid JSON: {e}", param_hint="--policy") from e
    elif policy is not None:
        chosen = {"name": policy}
    extra = key_values(options, "--policy-option", typed=True)
    if extra and not chosen:
        raise click.UsageError("--policy-option needs --policy")
    return {**chosen, **extra} or None


@click.command(epilog="\b\nExample:\n  ledger describe payments --json")
@click.argument("name")
@output_options
@pass_session
def describe(session: Session, name: str, output_format: str | None) -> None:
    """Show a table's schema, key, policy, partitions (files, live entries, entries, bytes)
    and config, all from the log."""
    table = session.table(name)
    snapshot = table.snapshot()
    described = {
        "table": table.name,
        "version": table.version,
        "live_entries": snapshot.count(),
        "schema": table.schema,
        "primary_key": list(table.primary_key),
        "partition_by": list(table.partition_by),
        "policy": table.config["policy"],
        "partitions": partition_rows(snapshot, snapshot.markers()),
        "config": table.config,
    }
    if output.chosen_format(output_format) == output.JSON:
        output.print_object(described, output_format)
        return
    _print_description(table, described, output_format)


def partition_rows(snapshot: Snapshot, markers: Sequence[FileMarker]) -> list[dict[str, Any]]:
    """Per partition: its values, alive files, live entries (its ``count(partitions=...)``), every
    entry its files hold (delete marks included) and bytes."""
    grouped: dict[tuple[tuple[str, str | None], ...], list[FileMarker]] = {}
    for marker in markers:
        grouped.setdefault(tuple(sorted(marker.partition.items())), []).append(marker)
    rows = []
    for values, files in sorted(grouped.items(), key=lambda item: str(item[0])):
        rows.append(
            {
                "partition": "/".join(f"{k}={v}" for k, v in values) or "(all)",
                "files": len(files),
                "live_entries": rows_of(snapshot, files),
                "entries": sum(m.rows for m in files),
                "bytes": sum(m.size for m in files),
            }
        )
    return rows


def _print_description(table: Table, described: dict[str, Any], output_format: str | None) -> None:
    key = set(table.primary_key)
    summary = [
        {"property": "table", "value": table.name},
        {"property": "version", "value": table.version},
        {"property": "live_entries", "value": described["live_entries"]},
        {"property": "primary_key", "value": ", ".join(table.primary_key)},
        {"property": "partition_by", "value": ", ".join(table.partition_by)},
        {"property": "policy", "value": json.dumps(described["policy"])},
    ]
    config = [
        {"property": f"config.{k}", "value": v if isinstance(v, str | int) else json.dumps(v)}
        for k, v in sorted(described["config"].items())
        if k not in ("policy", "primary_key", "partition_by")
    ]
    columns = [
        {"column": c, "type": t, "key": "yes" if c in key else ""} for c, t in table.schema.items()
    ]
    partitions = described["partitions"]
    if output.chosen_format(output_format) == output.TABLE:
        output.print_rows(summary, output_format, title=f"table {table.name}")
        output.print_rows(columns, output_format, title="columns")
        output.print_rows(
            partitions,
            output_format,
            title="partitions",
            columns=["partition", "files", "live_entries", "entries", "bytes"],
        )
        output.print_rows(config, output_format, title="config")
        return
    flat = summary + [{"property": f"column.{c['column']}", "value": c["type"]} for c in columns]
    flat += [
        {
            "property": f"partition.{p['partition']}",
            "value": (
                f"files={p['files']} live_entries={p['live_entries']} entries={p['entries']} "
                f"bytes={p['bytes']}"
            ),
        }
        for p in partitions
    ]
    output.print_rows(flat + config, output_format, columns=["property", "value"])


COMMANDS = [init, tables, create, describe]
