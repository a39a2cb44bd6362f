"""Maintenance and derived tables: ``merge``, ``vacuum``, ``drop-partitions``, ``rollup``,
``publish``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from urllib.parse import urlparse

import click

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.parsing import Duration, key_values, partition_filter
from ledger.cli.progress import activity
from ledger.cli.session import Session, is_s3, pass_session
from ledger.publish.delta_rs import publish_delta
from ledger.storage.s3_settings import s3_settings

DEFAULT_GRACE = "7d"


@click.command(
    epilog="""\b
Examples:
  ledger merge payments
  ledger merge events --partition day=2026-01-31 --max-files 50
"""
)
@click.argument("table")
@click.option("--partition", multiple=True, metavar="FIELD=VALUE", help="Only this partition.")
@click.option("--max-files", type=click.IntRange(min=2), help="Files merged per partition.")
@click.option("--max-file-size", type=click.IntRange(min=1), help="Merge files below these bytes.")
@click.option(
    "--min-files",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Merge a partition only when it has this many files (1 also collapses one file).",
)
@click.option("--order", type=click.Choice(["ascending", "descending"]), default="ascending")
@click.option("--max-partitions", type=click.IntRange(min=1), help="Partitions merged at most.")
@output_options
@pass_session
def merge(
    session: Session,
    table: str,
    partition: Sequence[str],
    max_files: int | None,
    max_file_size: int | None,
    min_files: int,
    order: str,
    max_partitions: int | None,
    output_format: str | None,
) -> None:
    """Compact TABLE's small files through its merge policy; no answer changes."""
    target = session.table(table)
    with activity(f"merge {table}"):
        result = target.merge(
            partition_filter(partition),
            max_files=max_files,
            max_file_size=max_file_size,
            min_files=min_files,
            order=order,
            max_partitions=max_partitions,
        )
    output.print_object(
        {
            "table": table,
            "version": result.version,
            "partitions": len(result.merged),
            "files_in": result.files_in,
            "files_out": result.files_out,
            "entries_in": result.entries_in,
            "entries_out": result.entries_out,
            "conflicts": len(result.conflicts),
        },
        output_format,
    )


@click.command(
    epilog="""\b
Examples:
  ledger vacuum payments                 # files tombstoned over 7 days ago
  ledger vacuum payments --grace 1h
"""
)
@click.argument("table")
@click.option(
    "--grace",
    type=Duration(),
    default=DEFAULT_GRACE,
    show_default=True,
    help="Keep what snapshots younger than this need: a number and a unit, e.g. 30s, 15m, 2h, "
    "7d, 1w.",
)
@output_options
@pass_session
def vacuum(session: Session, table: str, grace: dt.timedelta, output_format: str | None) -> None:
    """Delete files of TABLE no snapshot younger than --grace needs."""
    target = session.table(table)
    with activity(f"vacuum {table}"):
        result = target.vacuum(grace)
    output.print_object({"table": table, **vars(result)}, output_format)


@click.command(
    name="drop-partitions",
    epilog="""\b
Examples:
  ledger drop-partitions events --partition day=2026-01-01 --partition day=2026-01-02
  ledger drop-partitions events --where "day < '2026-01-01'"
""",
)
@click.argument("table")
@click.option("--partition", multiple=True, metavar="FIELD=VALUE", help="A partition (repeat).")
@click.option("--where", help="A predicate over the partition fields (values as text).")
@output_options
@pass_session
def drop_partitions(
    session: Session,
    table: str,
    partition: Sequence[str],
    where: str | None,
    output_format: str | None,
) -> None:
    """Remove whole partitions of TABLE in one commit (the log only; files go at vacuum)."""
    if not partition and where is None:
        raise click.UsageError("name the partitions with --partition or --where")
    target = session.table(table)
    change = target.drop_partitions(partition_filter(partition), where=where)
    if change.files_removed == 0:  # a typo in a value must not look like a drop
        output.message(
            f"nothing matched: no partition of {table} was dropped (no commit)"
            + _null_partition_hint(partition)
        )
    output.print_object({"table": table, **vars(change)}, output_format)


def _null_partition_hint(pairs: Sequence[str]) -> str:
    """`describe` shows the NULL partition as FIELD=None; `--partition FIELD=None` names the text
    'None', so point at the predicate that names NULL."""
    for pair in pairs:
        field, _, value = pair.partition("=")
        if value.strip().lower() in ("none", "null"):
            return f'; the NULL partition is named with --where "{field} IS NULL"'
    return ""


@click.group(epilog="\b\nExample:\n  ledger rollup refresh daily_totals")
def rollup() -> None:
    """Rollup tables: totals per group that follow a base table."""


@rollup.command(
    name="create",
    epilog="""\b
Example:
  ledger rollup create per_account --of payments --by account \\
      --measure payments=count --measure total=sum(amount)
""",
)
@click.argument("name")
@click.option("--of", "base", required=True, help="The base table.")
@click.option("--by", multiple=True, required=True, help="Group column (repeat).")
@click.option(
    "--measure",
    multiple=True,
    required=True,
    metavar="NAME=count|count(col)|sum(col)",
    help="An output column (repeat).",
)
@click.option("--auto-refresh", is_flag=True, help="Refresh after every write to the base.")
@output_options
@pass_session
def create_rollup(
    session: Session,
    name: str,
    base: str,
    by: Sequence[str],
    measure: Sequence[str],
    auto_refresh: bool,
    output_format: str | None,
) -> None:
    """Create rollup NAME of a base table and fill it."""
    measures = {k: str(v) for k, v in key_values(measure, "--measure").items()}
    source = session.table(base)
    with activity(f"create rollup {name}"):
        made = source.create_rollup(name, list(by), measures, auto_refresh=auto_refresh)
    output.print_object({"rollup": name, "base": base, "watermark": made.watermark}, output_format)


@rollup.command(name="refresh", epilog="\b\nExample:\n  ledger rollup refresh per_account")
@click.argument("name")
@click.option("--rebuild", is_flag=True, help="Recompute from the base's latest snapshot.")
@output_options
@pass_session
def refresh_rollup(session: Session, name: str, rebuild: bool, output_format: str | None) -> None:
    """Roll the base table's new commits into rollup NAME, exactly once."""
    target = session.rollup(name)
    with activity(f"refresh {name}"):
        result = target.rebuild() if rebuild else target.refresh()
    output.print_object({"rollup": name, **vars(result)}, output_format)


@click.command(
    epilog="""\b
Examples:
  ledger publish payments ./lake/payments
  ledger publish payments s3://bucket/lake/payments --storage-option AWS_REGION=eu-west-1
"""
)
@click.argument("table")
@click.argument("target")
@click.option(
    "--storage-option", multiple=True, metavar="NAME=VALUE", help="A deltalake storage option."
)
@output_options
@pass_session
def publish(
    session: Session,
    table: str,
    target: str,
    storage_option: Sequence[str],
    output_format: str | None,
) -> None:
    """Publish TABLE's visible rows (a rollup's totals) into the Delta Lake table at TARGET."""
    source = session.table(table)
    published = session.rollup(table) if source.config.get("rollup") else source
    options = {
        **_delta_s3_options(session, target),
        **key_values(storage_option, "--storage-option"),
    }
    with activity(f"publish {table}"):
        result = publish_delta(published, target, storage_options=options or None)
    output.print_object({"table": table, "target": target, **vars(result)}, output_format)


def _delta_s3_options(session: Session, target: str) -> dict[str, str]:
    """The command's S3 endpoint and region, for deltalake, when TARGET is on S3."""
    if not is_s3(target):
        return {}
    options: dict[str, str] = {}
    settings = s3_settings(session.s3_options)
    endpoint = settings.endpoint_url
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if urlparse(endpoint).scheme == "http":
            options["AWS_ALLOW_HTTP"] = "true"
    region = settings.region
    if region:
        options["AWS_REGION"] = region
    return options


COMMANDS = [merge, vacuum, drop_partitions, rollup, publish]
