"""A warehouse: a store holding tables, one folder per table.

>>> import ledger
>>> wh = ledger.connect("./warehouse")                                   # doctest: +SKIP
>>> wh.create_table("accounts", {"account": "VARCHAR", "amount": "DECIMAL(18,2)"},
...                 primary_key=["account"])                             # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from ledger import lifecycle
from ledger.engines.duckdb.session import release_read_sessions
from ledger.errors import InvalidArgumentError
from ledger.lifecycle import DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_TRANSACTION_TIMEOUT_S
from ledger.log.handle import clock as log_clock
from ledger.rollup import Rollup, open_rollup
from ledger.storage import Store, open_store
from ledger.storage.s3_settings import s3_settings
from ledger.table import Table

WAREHOUSE_MARKER = ".ledger-warehouse"
"""The object ``ledger init`` writes at the root of a warehouse on S3 (docs/format.md 1): a
prefix holds no folder to find, so the mark is how the command line tells a warehouse from a
mistyped prefix. Its name is no table's name."""


def mark_warehouse(store: Store) -> None:
    """Write the warehouse marker at the root of ``store`` unless it is there (written once:
    it is not rewritten by a later ``ledger init``)."""
    if not is_marked_warehouse(store):
        store.put(WAREHOUSE_MARKER, json.dumps({"v": 1}, separators=(",", ":")).encode() + b"\n")


def is_marked_warehouse(store: Store) -> bool:
    """Whether the root of ``store`` holds the warehouse marker."""
    return any(info.key == WAREHOUSE_MARKER for info in store.list(WAREHOUSE_MARKER))


def connect(
    uri: str = "./warehouse",
    *,
    source_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> Warehouse:
    """Open (or start) a warehouse at a local path (text or ``pathlib.Path``), ``file://`` URI
    or ``s3://bucket/prefix``.

    S3 options: ``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
    ``session_token``; what is not given comes from the environment (``AWS_ENDPOINT_URL_S3``,
    ``AWS_ENDPOINT_URL``, ``AWS_REGION``) and the standard AWS credential chain.

    ``source_options`` (the same five names) are the S3 options ``s3://`` load sources are read
    with; by default a warehouse on S3 reads them with its own options, any other with the
    environment's.

    >>> wh = connect("./warehouse")                                        # doctest: +SKIP
    >>> wh = connect("./wh", source_options={"endpoint_url": "http://minio:9000"})  # doctest: +SKIP
    """
    if isinstance(uri, os.PathLike):
        uri = os.fspath(uri)
    if not isinstance(uri, str):
        raise InvalidArgumentError(
            f"connect takes the warehouse's location as text (a path, file:// or s3:// URI), "
            f"not {type(uri).__name__} {uri!r}"
        )
    sources = None if source_options is None else s3_settings(source_options)
    store = open_store(uri, **options)
    store.source_settings = sources
    return Warehouse(store)


class Warehouse:
    """The tables stored under one URI."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"Warehouse({self.store.uri!r})"

    def create_table(
        self,
        name: str,
        schema: Mapping[str, str] | pa.Schema | Sequence[tuple[str, str]],
        primary_key: Sequence[str] | str | None = None,
        partition_by: Sequence[str] | str | None = None,
        sort_by: Sequence[str] | str | None = None,
        policy: str | Mapping[str, Any] | None = None,
        *,
        checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
        transaction_timeout: float = DEFAULT_TRANSACTION_TIMEOUT_S,
        rollup_of: Mapping[str, Any] | None = None,
        insert_transform: str | None = None,
    ) -> Table:
        """Create a table and return it; raise :class:`TableExistsError` if the name is taken.

        ``schema`` maps column names to SQL types (``BIGINT``, ``VARCHAR``, ``DECIMAL(18,2)``,
        ``TIMESTAMP``, ...) or is a pyarrow schema. Without a primary key the table gets a
        generated ``_row_id`` so every entry can still be cancelled.

        ``policy`` is the merge policy (``"collapsing"``, the default; ``"replacing"``,
        ``"aggregating"``, ``"dedup"`` or ``"custom"``, with options as a mapping, see
        docs/merges.md). ``transaction_timeout`` (seconds) is how long a transaction may stay
        open: vacuum treats uncommitted files older than that as orphans. ``rollup_of`` is set
        by :meth:`Table.create_rollup` (the definition of a rollup table).

        ``insert_transform`` is a SELECT over the relation ``rows`` (the columns each write
        passes) run on the rows of every insert, upsert and update before they are checked
        against the schema, e.g. ``"select *, 1::BIGINT as cnt from rows"``; see
        docs/concepts.md. Change it later with :meth:`Table.set_insert_transform`.
        """
        confirmed_at = log_clock()  # the state created next is the latest as of then
        state = lifecycle.create_table(
            self.store,
            name,
            schema,
            primary_key,
            partition_by,
            sort_by,
            policy,
            checkpoint_interval=checkpoint_interval,
            transaction_timeout=transaction_timeout,
            rollup_of=rollup_of,
            insert_transform=insert_transform,
        )
        return Table(self.store, name, state, confirmed_at)

    def table(self, name: str) -> Table:
        """Open a table; raise :class:`TableNotFoundError` if it does not exist."""
        confirmed_at = log_clock()  # the state read next is the latest as of then
        return Table(self.store, name, lifecycle.load_table(self.store, name), confirmed_at)

    def rollup(self, name: str) -> Rollup:
        """Open the rollup table ``name`` with the base table it follows.

        >>> wh.rollup("daily_views").refresh()                           # doctest: +SKIP
        """
        return open_rollup(self.table(name))

    def tables(self) -> list[str]:
        """Names of the tables in the warehouse (dropped ones excluded)."""
        return lifecycle.table_names(self.store)

    def drop_table(self, name: str, *, purge: bool = False) -> None:
        """Drop a table: one commit makes it disappear for every reader and writer. The log
        stays, so a writer that raced the drop fails cleanly instead of resurrecting the table.

        Data files stay too, so snapshots taken before the drop remain readable until vacuum
        removes tombstoned files; ``purge=True`` deletes them at once instead (those snapshots
        then fail to read).
        """
        lifecycle.drop_table(self.store, name, purge=purge)

    def close(self) -> None:
        """Let go of the DuckDB database the reads of this warehouse's tables run on (kept
        between calls so each view call does not open one): reads running in other threads and
        relations views returned still finish on it, and it is freed when the last is gone; a
        later read opens a new one.

        >>> with ledger.connect("./warehouse") as wh:                          # doctest: +SKIP
        ...     views.totals(wh.table("accounts")).fetchall()
        """
        release_read_sessions(self.store)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
