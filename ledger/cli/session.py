"""What every subcommand shares: where the warehouse is and how to reach it.

Read and write commands open a warehouse that must already exist (``ledger init`` makes one),
so a mistyped ``--warehouse`` fails instead of leaving an empty folder behind: locally a folder,
on S3 a prefix holding the warehouse marker ``ledger init`` writes, or a table.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import click

from ledger.errors import TableNotFoundError
from ledger.rollup import Rollup
from ledger.table import Table
from ledger.warehouse import Warehouse, connect, is_marked_warehouse, mark_warehouse

DEFAULT_WAREHOUSE = "./warehouse"


class CommandError(click.ClickException):
    """A failure the command reports in one line, exit code 1."""

    exit_code = 1


@dataclass(frozen=True)
class Session:
    """The root options: the warehouse URI, S3 options and ``--debug``."""

    warehouse_uri: str = DEFAULT_WAREHOUSE
    s3_options: dict[str, Any] = field(default_factory=dict)
    debug: bool = False

    def connect_options(self, uri: str) -> dict[str, Any]:
        """S3 options are the store's own for an ``s3://`` URI; a local store takes them for
        its ``s3://`` load sources."""
        if is_s3(uri):
            return dict(self.s3_options)
        return {"source_options": dict(self.s3_options)} if self.s3_options else {}

    def create_warehouse(self, uri: str | None = None) -> Warehouse:
        """Open the warehouse at ``uri`` (default: ``--warehouse``), making its folder."""
        target = uri or self.warehouse_uri
        if not is_s3(target):
            # The library makes folders only when a table is written; `init` is the one
            # command whose purpose is the empty warehouse itself.
            make_folder(target)
        warehouse = connect(target, **self.connect_options(target))
        if is_s3(target):
            check_bucket(warehouse, target)
            mark_warehouse(warehouse.store)
        return warehouse

    def warehouse(self) -> Warehouse:
        """Open the existing warehouse; never creates anything."""
        uri = self.warehouse_uri
        if not is_s3(uri):
            path = local_path(uri)
            if not os.path.isdir(path):
                raise CommandError(
                    f"no warehouse at {uri!r}: create it with `ledger init {uri}` or point "
                    "--warehouse (or LEDGER_WAREHOUSE) at an existing one"
                )
            return connect(uri, **self.connect_options(uri))
        warehouse = connect(uri, **self.connect_options(uri))
        check_bucket(warehouse, uri)
        # A prefix is no folder that exists or not: `ledger init` marks it. A warehouse made
        # before the marker existed (or by Python, which writes none) is one that holds tables.
        if not is_marked_warehouse(warehouse.store) and not warehouse.tables():
            raise CommandError(
                f"no warehouse at {uri!r}: the prefix holds no warehouse marker and no table; "
                f"create it with `ledger init {uri}` or point --warehouse (or LEDGER_WAREHOUSE) "
                "at an existing one"
            )
        return warehouse

    def table(self, name: str) -> Table:
        """Open table ``name``; a name that is not a table is named with the closest ones."""
        warehouse = self.warehouse()
        try:
            return warehouse.table(name)
        except TableNotFoundError as e:
            raise table_not_found(warehouse, name, e) from e

    def rollup(self, name: str) -> Rollup:
        """Open rollup ``name`` with its base table, as :meth:`table` opens a table."""
        warehouse = self.warehouse()
        try:
            return warehouse.rollup(name)
        except TableNotFoundError as e:
            raise table_not_found(warehouse, name, e) from e


def table_not_found(warehouse: Warehouse, name: str, error: TableNotFoundError) -> Exception:
    """The library's error, said for the command: the closest names, and how to list them."""
    names = warehouse.tables()
    if name in names:  # the table exists; what is missing is something else (its base)
        return error
    close = difflib.get_close_matches(name, names, n=3)
    hint = (
        f"did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else "`ledger tables` lists the tables"
    )
    return TableNotFoundError(f"table {name!r} does not exist in {warehouse.store.uri}; {hint}")


def make_folder(uri: str) -> None:
    """Make the local folder of a warehouse; a path that cannot be one is a clear error."""
    path = local_path(uri)
    if os.path.exists(path) and not os.path.isdir(path):
        raise CommandError(
            f"cannot make a warehouse at {uri!r}: it is a file; give the path of a folder "
            "(new or existing)"
        )
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:  # a parent that is a file, no permission, a read-only disk
        raise CommandError(f"cannot make a warehouse at {uri!r}: {e.strerror or e}") from e


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def local_path(uri: str) -> str:
    return urlparse(uri).path if uri.startswith("file://") else uri


def check_bucket(warehouse: Warehouse, uri: str) -> None:
    """A missing bucket is named as such, not reported as an empty warehouse."""
    client: Any = getattr(warehouse.store, "client", None)
    bucket = urlparse(uri).netloc
    if client is None:
        return
    try:
        client.head_bucket(Bucket=bucket)
    except Exception as e:  # botocore's ClientError, or a connection error
        code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise CommandError(
                f"no warehouse at {uri!r}: bucket {bucket!r} does not exist; create the bucket "
                "first"
            ) from e
        raise CommandError(f"cannot reach bucket {bucket!r} of {uri!r}: {e}") from e


pass_session = click.make_pass_decorator(Session)
